from django.apps import AppConfig


class ExecutionConfig(AppConfig):
    name = "bloomops.execution"
    label = "execution"
    verbose_name = "Execution queue engine"

    def ready(self) -> None:
        from bloomops.execution import approvals, people

        approvals.check_settings()
        people.check_settings()
