import os

from django.apps import AppConfig
from django.core import checks


def check_seal_key(app_configs=None, **kwargs) -> list[checks.Warning]:
    """`check --deploy`: the keys of the action records' seals should come from where the
    application's secrets live, not var/seal_key beside the embedded database's files
    (RULES.md#evidence)."""
    if os.environ.get("BLOOMOPS_SEAL_KEYS", "").strip():
        return []
    return [checks.Warning(
        "The action records' seal key is var/seal_key, on the same disk as the embedded"
        " database: whoever can copy one can copy the other.",
        hint="Set BLOOMOPS_SEAL_KEYS from your secrets store, the same for every process"
             " that writes actions (docs/DEPLOY.md).",
        id="bloomops.W002")]


class ExecutionConfig(AppConfig):
    name = "bloomops.execution"
    label = "execution"
    verbose_name = "Execution queue engine"

    def ready(self) -> None:
        from bloomops.execution import approvals, people

        approvals.check_settings()
        people.check_settings()
        checks.register(check_seal_key, checks.Tags.security, deploy=True)
