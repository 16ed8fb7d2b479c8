from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "bloomops.api"
    label = "bloomops_api"
    verbose_name = "bloomops JSON API"

    def ready(self) -> None:
        from bloomops.accounts.profiles import credentials_ended
        from bloomops.api.tokens import revoke

        def revoke_tokens(sender, user, **kwargs) -> None:
            revoke(username=user.get_username())

        credentials_ended.connect(revoke_tokens, weak=False,
                                  dispatch_uid="bloomops-api-revoke-on-credentials-ended")
