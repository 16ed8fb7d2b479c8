from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from bloomops.execution.indexes import READ_INDEXES, RETIRED
from bloomops.tapdb.bootstrap import BootstrapError, bootstrap
from bloomops.tapdb.tenancy import tenant_of


class Command(BaseCommand):
    help = (
        "Attach bloomops to an existing TapDB database (a Bloom LIMS one, say) given by "
        "DATABASE_URL: add only what bloomops needs (its identity-prefix rows and sequences, "
        "the templates the database lacks, its read indexes and functions, its runtime role, "
        "Django's own tables) and say what was added. Rows bloomops does not act on, the "
        "database's schema and another writer's templates and queues are left as they are. "
        "Idempotent."
    )

    def handle(self, *args, **options) -> None:
        try:
            report = bootstrap(read_indexes=READ_INDEXES, retired=RETIRED)
        except BootstrapError as exc:
            raise CommandError(str(exc)) from exc
        for line in report.lines():
            self.stdout.write(line)
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Django tables (sign-ins, sessions, API tokens): migrated.")
        tenant = tenant_of()
        self.stdout.write(
            "Tenant: rows with tenant_id NULL (as Bloom writes them)." if tenant is None else
            f"Tenant: {tenant}. A Bloom database writes tenant_id NULL: set"
            " BLOOMOPS_TENANT_ID=none to work on its rows.")
