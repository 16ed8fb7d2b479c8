from django.apps import AppConfig


class ExecutionConfig(AppConfig):
    name = "bloomops.execution"
    label = "execution"
    verbose_name = "Execution queue engine"
