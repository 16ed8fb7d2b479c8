from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from bloomops.api.tokens import MAX_DAYS, create_token


class Command(BaseCommand):
    help = "Create an API bearer token for USERNAME and print it once (only a hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label to tell tokens apart")
        parser.add_argument("--days", type=int, default=None,
                            help=f"days until the token expires, 1 to {MAX_DAYS} (default:"
                                 f" {settings.BLOOMOPS_API_TOKEN_DAYS})")

    def handle(self, *args, **options) -> None:
        try:
            row, token = create_token(options["username"], name=options["name"],
                                      days=options["days"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {options['username']!r}.") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"Token {row.id} (prefix {row.prefix}) for {row.user.username},"
                          f" expires {row.expires_at.isoformat(timespec='seconds')};"
                          " it is shown only now:")
        self.stdout.write(token)
