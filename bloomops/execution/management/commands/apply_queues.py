from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from bloomops.execution.context import Actor
from bloomops.execution.errors import ActionError
from bloomops.execution.queue_plan import (
    CONFIG_ACTOR,
    QueueFileError,
    apply,
    plan,
    read_queue_file,
)


class Command(BaseCommand):
    help = (
        "Plan the difference between a TOML file of queue definitions ([[queue]] tables) and"
        " the database, print it, and apply it through the queue actions (create, update,"
        " enable/disable, replace). --check only prints the plan and exits 1 when the database"
        " differs. Applying twice changes nothing. Queues not in the file are left alone."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file")
        parser.add_argument("--check", action="store_true",
                            help="print the plan only; exit 1 when the database differs")
        parser.add_argument("--user", help="an admin user to record the changes as"
                            " (default: apply_queues)")

    def handle(self, *args, **options) -> None:
        try:
            specs, reason, problems = read_queue_file(options["file"])
            result = plan(specs, file_problems=problems)
        except QueueFileError as exc:
            raise CommandError(str(exc)) from None
        for line in result.lines():
            self.stdout.write(line)
        if options["check"]:
            if result.differs:
                # a finding, not a failure of the command: said plainly, exit status 1 (a
                # "CommandError:" line read as if the command had crashed)
                self.stdout.write("The database differs from the file: apply it without"
                                  " --check to make them the same.")
                raise SystemExit(1)
            return
        if result.blocked:
            raise CommandError("Some queues belong to another system; nothing applied.")
        try:
            with transaction.atomic():
                done = apply(result, reason=reason, actor=self._actor(options.get("user")))
        except ActionError as exc:
            raise CommandError(f"{exc.code}: {exc.message} {exc.details}") from None
        self.stdout.write(f"Applied {len(done)} change(s)." if done else "Nothing to apply.")

    @staticmethod
    def _actor(username: str | None) -> Actor:
        if not username:
            return CONFIG_ACTOR
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        return Actor.of(user)
