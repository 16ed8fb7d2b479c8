from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from bloomops.accounts.models import COMMAND_LINE
from bloomops.accounts.profiles import ProfileError, from_shell
from bloomops.accounts.tokens import MAX_DAYS, create_token


class Command(BaseCommand):
    help = ("Create an API bearer token for USERNAME and print it once (only a keyed digest is"
            " stored); recorded in their change history as given from the command line.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label to tell tokens apart")
        parser.add_argument("--reason", default="", help="why, kept in the person's change"
                            " history (with who ran the command)")
        parser.add_argument("--days", type=int, default=None,
                            help=f"days until the token expires, 1 to {MAX_DAYS} (default:"
                                 f" {settings.BLOOMOPS_API_TOKEN_DAYS})")

    def handle(self, *args, **options) -> None:
        try:
            row, token = create_token(
                options["username"], name=options["name"], days=options["days"],
                by=COMMAND_LINE, reason=from_shell("create_api_token", options["reason"]))
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {options['username']!r}.") from None
        except ProfileError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(f"Token {row.id} (prefix {row.prefix}) for {row.user.username},"
                          f" expires {row.expires_at.isoformat(timespec='seconds')};"
                          " it is shown only now:")
        self.stdout.write(token)
