from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "bloomops.api"
    label = "bloomops_api"
    verbose_name = "bloomops JSON API"
