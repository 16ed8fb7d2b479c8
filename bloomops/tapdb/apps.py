from django.apps import AppConfig
from django.db.backends.signals import connection_created


def declare_session(cursor, username: str | None = None) -> None:
    """TapDB's EUID and audit triggers refuse to run without these session settings, on
    every connection that writes (Django's, the outbox dispatcher's); ``username``: whom
    the audit log names for the connection's writes."""
    from django.conf import settings

    sql = ("SELECT set_config('session.current_domain_code', %s, false),"
           " set_config('session.current_owner_repo_name', %s, false)")
    params = [settings.TAPDB_DOMAIN_CODE, settings.TAPDB_OWNER_REPO_NAME]
    if username is not None:
        sql += ", set_config('session.current_username', %s, false)"
        params.append(username)
    cursor.execute(sql, params)


def _declare_tapdb_session(sender, connection, **kwargs) -> None:
    with connection.cursor() as cursor:
        declare_session(cursor)


class TapdbConfig(AppConfig):
    name = "bloomops.tapdb"
    label = "tapdb"
    verbose_name = "TapDB boundary"

    def ready(self) -> None:
        from django.core import checks

        from bloomops.tapdb.tenancy import check_own_tenant

        connection_created.connect(_declare_tapdb_session, dispatch_uid="bloomops-tapdb-session")
        checks.register(check_own_tenant, checks.Tags.security, deploy=True)
