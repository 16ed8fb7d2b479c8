from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate


def ensure_role_groups(sender, using="default", **kwargs) -> None:
    """The role groups are created by migration 0001_roles; re-assert them after every
    migrate/flush (as Django does for permissions) so a flushed database keeps its roles."""
    from django.contrib.auth.models import Group

    from bloomops.accounts.roles import ALL_ROLES

    for name in ALL_ROLES:
        Group.objects.using(using).get_or_create(name=name)


def grant_runtime_role(sender, using="default", **kwargs) -> None:
    """Tables a migration adds are granted to the runtime role at once (docs/DEPLOY.md)."""
    if using != "default":
        return
    from bloomops.tapdb.roles import ensure_runtime_role

    ensure_runtime_role()


class AccountsConfig(AppConfig):
    name = "bloomops.accounts"
    label = "accounts"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in
        from django.db.models.signals import post_save

        from bloomops.accounts.password_seals import seal_a_password_set
        from bloomops.accounts.sessions import note_given_password
        from bloomops.tapdb.roles import check_separate_runtime_role

        # Sent for apps with models only; auth always has them.
        post_migrate.connect(ensure_role_groups, sender=self.apps.get_app_config("auth"),
                             dispatch_uid="bloomops-roles")
        post_migrate.connect(grant_runtime_role, sender=self.apps.get_app_config("auth"),
                             dispatch_uid="bloomops-runtime-role")
        post_save.connect(seal_a_password_set, sender=self.apps.get_model("auth", "User"),
                          dispatch_uid="bloomops-password-seal")
        user_logged_in.connect(note_given_password, dispatch_uid="bloomops-given-password")
        checks.register(check_separate_runtime_role, checks.Tags.security, deploy=True)
