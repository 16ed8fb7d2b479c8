from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _declare_tapdb_session(sender, connection, **kwargs) -> None:
    """TapDB's EUID and audit triggers refuse to run without these session settings."""
    from django.conf import settings

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('session.current_domain_code', %s, false),"
            " set_config('session.current_owner_repo_name', %s, false)",
            [settings.TAPDB_DOMAIN_CODE, settings.TAPDB_OWNER_REPO_NAME],
        )


class TapdbConfig(AppConfig):
    name = "bloomops.tapdb"
    label = "tapdb"
    verbose_name = "TapDB boundary"

    def ready(self) -> None:
        connection_created.connect(_declare_tapdb_session, dispatch_uid="bloomops-tapdb-session")
