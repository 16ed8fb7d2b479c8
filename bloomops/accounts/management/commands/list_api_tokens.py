from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from bloomops.accounts.models import ApiToken


def _when(value) -> str:
    return value.isoformat(timespec="seconds") if value else "-"


class Command(BaseCommand):
    help = ("List API tokens (id, prefix, user, name, status, created, expires, last used,"
            " revoked). Without --all, only tokens that still authenticate.")

    def add_arguments(self, parser):
        parser.add_argument("--user", default=None)
        parser.add_argument("--all", action="store_true",
                            help="include revoked and expired tokens")

    def handle(self, *args, **options) -> None:
        now = timezone.now()
        rows = ApiToken.objects.select_related("user")
        if options["user"]:
            if not get_user_model().objects.filter(username=options["user"]).exists():
                # a misspelt person listed no tokens, as if they had none
                raise CommandError(f"No person {options['user']!r}.")
            rows = rows.filter(user__username=options["user"])
        if not options["all"]:
            rows = rows.filter(ApiToken.working(now))
        self.stdout.write("id\tprefix\tuser\tname\tstatus\tcreated\texpires\tlast_used\trevoked")
        for row in rows:
            self.stdout.write("\t".join(str(v) for v in (
                row.id, row.prefix, row.user.username, row.name or "-", row.status(now),
                _when(row.created_at), _when(row.expires_at), _when(row.last_used_at),
                _when(row.revoked_at))))
