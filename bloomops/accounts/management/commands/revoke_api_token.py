from django.core.management.base import BaseCommand, CommandError

from bloomops.accounts.models import COMMAND_LINE
from bloomops.accounts.profiles import ProfileError, from_shell
from bloomops.accounts.tokens import named_tokens_exist, revoke


class Command(BaseCommand):
    help = ("Revoke API tokens: by id, by --prefix, or every token of --user; each is recorded"
            " in its person's change history as revoked from the command line.")

    def add_arguments(self, parser):
        parser.add_argument("token_id", nargs="?", type=int)
        parser.add_argument("--prefix", default=None)
        parser.add_argument("--user", default=None)
        parser.add_argument("--reason", default="", help="why, kept in the person's change"
                            " history (with who ran the command)")

    def handle(self, *args, **options) -> None:
        if options["token_id"] is None and not options["prefix"] and not options["user"]:
            raise CommandError("Give a token id, --prefix or --user.")
        try:
            n = revoke(token_id=options["token_id"], prefix=options["prefix"],
                       username=options["user"], by=COMMAND_LINE,
                       reason=from_shell("revoke_api_token", options["reason"]))
        except ProfileError as exc:  # a reason no record may hold, said as create's is
            raise CommandError(exc.message) from None
        if not n and not named_tokens_exist(token_id=options["token_id"],
                                            prefix=options["prefix"], username=options["user"]):
            # a mistyped id, prefix or user was "Revoked 0 token(s)." and exit 0
            raise CommandError("No token revoked: no token or person matches that.")
        if not n:  # an offboarding script run twice: the second run's wish holds already
            self.stdout.write("No token revoked: none of them is active (each was revoked"
                              " already or the person has none).")
            return
        self.stdout.write(f"Revoked {n} token(s).")
