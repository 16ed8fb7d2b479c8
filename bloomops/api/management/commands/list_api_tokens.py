from django.core.management.base import BaseCommand

from bloomops.api.models import ApiToken


class Command(BaseCommand):
    help = "List API tokens (id, prefix, user, name, created, last used, revoked)."

    def add_arguments(self, parser):
        parser.add_argument("--user", default=None)
        parser.add_argument("--all", action="store_true", help="include revoked tokens")

    def handle(self, *args, **options) -> None:
        rows = ApiToken.objects.select_related("user")
        if options["user"]:
            rows = rows.filter(user__username=options["user"])
        if not options["all"]:
            rows = rows.filter(revoked_at__isnull=True)
        self.stdout.write("id\tprefix\tuser\tname\tcreated\tlast_used\trevoked")
        for row in rows:
            self.stdout.write("\t".join(str(v) for v in (
                row.id, row.prefix, row.user.username, row.name or "-",
                row.created_at.isoformat(timespec="seconds"),
                row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "-",
                row.revoked_at.isoformat(timespec="seconds") if row.revoked_at else "-")))
