from django.core.management.base import BaseCommand, CommandError

from bloomops.execution.verification import verify_chains
from bloomops.tapdb.tenancy import tenant_of


class Command(BaseCommand):
    help = (
        "Verify the hash chain of action records (docs/RULES.md#evidence): of one target "
        "(a subject's, worker's or lease's EUID) or, without EUID, of every target. Prints the "
        "first broken link of each broken chain (which record, what differs) and exits "
        "non-zero when any is broken."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("euid", nargs="?", help="the target whose chain to verify")

    def handle(self, *args, euid: str | None = None, **options) -> None:
        report = verify_chains(tenant_of(), euid)
        if euid is not None and report.records == 0:
            raise CommandError(f"No action records on {euid}.")
        for broken in report.breaks:
            self.stderr.write(f"BROKEN {broken}")
        if not report.ok:
            raise CommandError(f"{len(report.breaks)} broken chain(s) of {report.chains}"
                               f" ({report.records} records); first: {report.breaks[0]}")
        self.stdout.write(f"{report.chains} chain(s), {report.records} records: intact.")
