from django.core.management.base import BaseCommand, CommandError

from bloomops.execution.indexes import READ_INDEXES, RETIRED
from bloomops.tapdb.bootstrap import BootstrapError, bootstrap


class Command(BaseCommand):
    help = (
        "Apply TapDB's schema from the installed daylily-tapdb package, configure identity "
        "prefixes and sequences, seed bloomops' template packs and create the queue read "
        "indexes. Idempotent: a second run changes nothing and says so."
    )

    def handle(self, *args, **options) -> None:
        try:
            report = bootstrap(read_indexes=READ_INDEXES, retired=RETIRED)
        except BootstrapError as exc:
            raise CommandError(str(exc)) from exc
        for line in report.lines():
            self.stdout.write(line)
