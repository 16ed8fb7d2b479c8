from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from bloomops.execution import selectors
from bloomops.execution.context import Actor
from bloomops.execution.errors import ActionError
from bloomops.execution.exports import export_evidence_set, refuse_unless_allowed


def _instant(text: str, name: str) -> datetime:
    """A day in the lab's time zone (BLOOMOPS_TIME_ZONE: a command has no reader's zone, as
    the Activity screen has), whole: --since from its start, --until to its end, as Activity's
    From and To read a day (--since D --until D was refused as empty); or an instant with
    its zone: a zoneless time would be read in whichever zone the machine has."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text) + timedelta(days=1 if name == "until" else 0)
            return datetime.combine(day, datetime.min.time(),
                                    ZoneInfo(settings.TIME_ZONE)).astimezone(UTC)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--{name} {text!r}: give a day (2026-11-01) or an instant with"
                           " its zone (2026-11-01T08:00:00Z)") from None
    if moment.tzinfo is None:
        raise CommandError(f"--{name} {text!r} has no zone: add Z or an offset")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before the first UTC instant
        raise CommandError(f"--{name} {text!r} is out of range") from None


class Command(BaseCommand):
    help = (
        "Export the evidence of a period (docs/RULES.md#evidence): the recorded bundle of"
        " every subject some action was taken on from --since up to --until (in --queue if"
        " given), one file each, and manifest.json naming each with its sha256 and the"
        " people's changes of the period. Each bundle is recorded as exported by --as."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--since", required=True, help=(
            "a day (from its start in BLOOMOPS_TIME_ZONE) or an instant with its zone"))
        parser.add_argument("--until", required=True, help=(
            "a day (to its end, included) or an instant with its zone (not included)"))
        parser.add_argument("--queue", default=None, help="only actions in this queue")
        parser.add_argument("--out", required=True, help="a new or empty directory")
        parser.add_argument("--as", dest="username", required=True,
                            help="the operator or admin the export is recorded as")

    def handle(self, *args, since: str, until: str, queue: str | None, out: str,
               username: str, **options) -> None:
        start, end = _instant(since, "since"), _instant(until, "until")
        if start >= end:
            raise CommandError("--since must come before --until.")
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active account {username!r} to record the export as.")
        if queue is not None and not selectors.queue_ever_named(queue):
            # a misspelt queue exported nothing, and the empty set verified
            raise CommandError(f"No queue {queue!r}, and no action names one: check its key"
                               " (the dashboard lists the queues by key).")
        directory = Path(out)
        if directory.exists() and not directory.is_dir():
            raise CommandError(f"{out} is a file: a set is written to a directory of its own.")
        try:  # before the directory is made: a refusal leaves nothing behind
            refuse_unless_allowed(Actor.of(user))
        except ActionError as err:
            raise CommandError(f"{err.code}: {err.message}") from None
        if directory.exists() and any(directory.iterdir()):
            raise CommandError(f"{out} is not empty: a set is written to a directory of its own.")
        directory.mkdir(parents=True, exist_ok=True)
        try:
            manifest, sha256 = export_evidence_set(Actor.of(user), start, end, directory,
                                                   queue_key=queue)
        except ActionError as err:
            raise CommandError(f"{err.code}: {err.message}") from None
        self.stdout.write(f"{len(manifest['bundles'])} bundle(s),"
                          f" {len(manifest['people_changes'])} people change(s) in {out}")
        self.stdout.write(f"manifest.json sha256 {sha256}")
