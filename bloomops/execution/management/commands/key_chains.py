from django.core.management.base import BaseCommand, CommandError

from bloomops.execution.chain import key_chains
from bloomops.tapdb.tenancy import tenant_of


class Command(BaseCommand):
    help = (
        "Give the action records written before the seal key (BLOOMOPS_SEAL_KEYS) their keyed"
        " seal, once (docs/RULES.md#evidence). Refused, writing nothing, while any chain is"
        " broken: a record changed before it is keyed must not be sealed as it is now."
    )

    def handle(self, *args, **options) -> None:
        try:
            keyed = key_chains(tenant_of())
        except ValueError as broken:
            raise CommandError(f"Not keyed, a chain is broken: {broken}") from None
        self.stdout.write(f"{keyed} record(s) keyed.")
