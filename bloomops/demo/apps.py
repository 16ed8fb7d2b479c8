from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "bloomops.demo"
    label = "demo"
    verbose_name = "Demo data (make run)"
