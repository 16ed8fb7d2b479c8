from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "bloomops.web"
    label = "web"
    verbose_name = "Operator UI"
