"""One operator action over many subjects, each through the executor on its own (one
refusal never stops the others), and the words that report the outcome."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bloomops.execution.errors import STALE_CODES, ActionError
from bloomops.web import services

# What each bulk verb runs, and the words for the confirmation and the outcome.
BULK_ACTIONS: dict[str, dict[str, str]] = {
    "requeue": {"action_key": "requeue_subject", "do": "Requeue", "done": "Requeued",
                "consequence": "go back to the queue and can be claimed again"},
    "hold": {"action_key": "place_execution_hold", "do": "Hold", "done": "Held",
             "consequence": "be held: nothing held can be claimed until its hold is released"},
    # not "Cancel": on a confirmation that reads as "don't do it"
    "cancel": {"action_key": "cancel_subject_execution", "do": "End the work on",
               "done": "Canceled",
               "consequence": "end for good: canceled work is never claimed again"},
    "release": {"action_key": "release_execution_hold", "do": "Release the holds of",
                "done": "Released the holds of",
                "consequence": "be released from hold and become claimable again"},
    # a dead letter's requeue while it needs a second person (RULES.md#approvals): asked for
    "ask_requeue": {"action_key": "request_approval", "asks": "requeue_subject",
                    "do": "Ask a second person to approve requeueing",
                    "done": "Asked a second person to approve requeueing",
                    "consequence": "wait in Approvals until another operator signs or"
                                   " rejects each requeue"},
}


def bulk_payload(verb: str, reason: str, hold_code: str = "") -> dict[str, Any]:
    """The payload each item's action is sent with: the reason (and hold code), or for a
    request the gated action it asks for, with the reason as both the request's and the
    action's."""
    if gated := BULK_ACTIONS[verb].get("asks"):
        return {"action_key": gated, "reason": reason, "parameters": {"reason": reason}}
    return {"reason": reason, **({"hold_code": hold_code} if verb == "hold" and hold_code
                                 else {})}


@dataclass(frozen=True)
class Pick:
    """A subject as the page showed it: the guard against acting on a changed subject; on a
    list of holds, the hold ticked (a release ends that hold alone, RULES.md#holds)."""

    euid: str
    state: str | None
    revision: int | None
    hold: str | None = None

    @classmethod
    def parse(cls, raw: str) -> Pick | None:
        """None for an empty pick; ValueError for one the page cannot have sent (a guard
        read loosely would be a guard dropped)."""
        euid, sep, rest = raw.partition("|")
        state, _, rest = rest.partition("|")
        revision, _, hold = rest.partition("|")
        if not euid.strip():
            return None
        if not sep:  # a page sends the guard with every pick, empty or not
            raise ValueError(raw)
        return cls(euid.strip(), state or None, page_revision(revision), hold.strip() or None)

    def encode(self) -> str:
        guard = f"{self.euid}|{self.state or ''}|{'' if self.revision is None else self.revision}"
        return f"{guard}|{self.hold}" if self.hold else guard


_REVISION = re.compile(r"[0-9]{1,12}")


def page_revision(text: str) -> int | None:
    """A revision a page carries (its guard), or None when it carries none. ValueError for
    anything else: ASCII digits only ("²" passes isdigit() and fails int(); int() reads
    "٣" as 3)."""
    text = text.strip()
    if not text:
        return None
    if not _REVISION.fullmatch(text):
        raise ValueError(text)
    return int(text)
UNREADABLE_PICK = "The page sent a selection it could not read: reload it and select again."


def picks_from(raw: list[str]) -> list[Pick]:
    """The subjects (or holds) selected, each once (ValueError: a pick the page cannot have
    sent, or one subject picked with different guards)."""
    picks: dict[tuple[str, str | None], Pick] = {}
    guards: dict[str, tuple[str | None, int | None]] = {}
    for item in raw:
        pick = Pick.parse(item)
        if pick is None:
            continue
        if guards.setdefault(pick.euid, (pick.state, pick.revision)) != (pick.state,
                                                                          pick.revision):
            raise ValueError(pick.euid)
        picks.setdefault((pick.euid, pick.hold), pick)
    return list(picks.values())


# The most one bulk action runs on: each item is an action of its own, one after another
# in the request, and a request must end well within the server's timeout (about 45 ms an
# item on a lab-year database; docs/DEPLOY.md). More is refused before anything is written.
BULK_MAX = 200


def too_many(picks: list[Pick]) -> str | None:
    """Why these are too many for one bulk action, or None."""
    if len(picks) <= BULK_MAX:
        return None
    return (f"{len(picks)} items are more than one bulk action takes ({BULK_MAX} at most)."
            " Narrow the filter or tick fewer, then run it again for the rest.")


# A refusal of one of these payload fields is the same for every item: said once, and the
# run stops before writing anything.
FORM_FIELDS = ("reason", "hold_code", "parameters.reason")


@dataclass
class BulkOutcome:
    done: list[str] = field(default_factory=list)
    replayed: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    forbidden: str | None = None
    invalid: str | None = None
    holds: bool = False  # holds were released one by one, not every hold of each subject


def run_bulk(user, verb: str, picks: list[Pick], *, idempotency_key: str,
             payload: dict[str, Any]) -> BulkOutcome:
    """Run ``verb`` on every pick. A FORBIDDEN refusal (the role can do none of them) or a
    refused form field (``FORM_FIELDS``) stops the run; other refusals are per subject."""
    action_key = BULK_ACTIONS[verb]["action_key"]
    out = BulkOutcome()
    if problem := too_many(picks):
        out.invalid = problem
        return out
    # a subject this run changed (a first hold of it released) is expected as it left it
    left: dict[str, tuple[str | None, int | None]] = {}
    for pick in _one_per_subject(picks) if verb != "release" else picks:
        state, revision = left.get(pick.euid, (pick.state, pick.revision))
        hold = pick.hold if verb == "release" else None
        target = f"{pick.euid}:{hold}" if hold else pick.euid
        try:
            result = services.perform(
                user, action_key, subject_euid=pick.euid, hold_euid=hold,
                idempotency_key=f"{idempotency_key}:{target}" if idempotency_key else "",
                expected_state=state, expected_revision=revision, payload=dict(payload))
        except ActionError as err:
            if err.code == "FORBIDDEN":
                out.forbidden = err.message
                return out
            if err.code == "VALIDATION_ERROR" and err.details.get("field") in FORM_FIELDS:
                out.invalid = err.message
                return out
            out.refused.append((pick.euid, err.message + (
                services.last_change(pick.euid) if err.code in STALE_CODES else "")))
            continue
        left[pick.euid] = (result.get("state") or state, result.get("revision") or revision)
        if result.replayed:
            out.replayed += 1
        else:
            out.done.append(
                f"{hold} on {pick.euid} ("
                + ("still held by another" if result.get("active_holds_remaining")
                   else "no longer held") + ")" if hold else pick.euid)
            out.holds = out.holds or bool(hold)
    return out


def _one_per_subject(picks: list[Pick]) -> list[Pick]:
    """What acts on a subject as a whole (cancel, requeue) once, however many of its holds
    were ticked."""
    first: dict[str, Pick] = {}
    for pick in picks:
        first.setdefault(pick.euid, pick)
    return list(first.values())


def outcome_messages(verb: str, out: BulkOutcome) -> list[tuple[str, str]]:
    """(level, text) pairs for Django's messages."""
    said: list[tuple[str, str]] = []
    if out.invalid:
        said.append(("error", f"Nothing done: {out.invalid}"))
    if out.done:
        done = (f"Released {len(out.done)} hold{'s' if len(out.done) > 1 else ''}"
                if out.holds else f"{BULK_ACTIONS[verb]['done']} {len(out.done)}")
        said.append(("success", f"{done}: "
                                f"{', '.join(out.done[:20])}{' …' if len(out.done) > 20 else ''}."))
    if out.replayed:
        said.append(("info", f"{out.replayed} already done before; nothing was repeated."))
    for euid, message in out.refused[:20]:
        said.append(("error", f"{euid}: {message}"))
    if len(out.refused) > 20:
        said.append(("error", f"…and {len(out.refused) - 20} more refused."))
    return said
