from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "bloomops.web"
    label = "web"
    verbose_name = "Operator UI"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out

        user_logged_out.connect(_signed_out, dispatch_uid="bloomops.web.signed_out")


def _signed_out(sender, request, user, **kwargs) -> None:
    # imported here: the app registry is not ready when this module is
    from bloomops.web import services

    services.signed_out(user)
