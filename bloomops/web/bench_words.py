"""What a person at the bench reads: retry classes, steps, lost leases and their worker's
standing in plain words, and refusals without engine jargon."""

from __future__ import annotations

import re
from typing import Any

from bloomops.execution.actions.fields import required_words, too_long_words
from bloomops.execution.envelope import parse_ts_or_none
from bloomops.execution.policy import failure_classes_for
from bloomops.execution.results import RESULT_FIELD
from bloomops.execution.states import RETRY_CLASS_WORDS, TRANSIENT_CLASSES, RetryClass
from bloomops.web.timewords import local_clock

# Refusals whose engine words a person at the bench should not have to decode.
BENCH_REFUSALS: dict[str, str] = {
    "WORKER_UNAVAILABLE": "An admin has stopped new work for you (your worker is paused or"
                          " disabled). Finish or release what you hold; ask an admin to let you"
                          " take work again.",
    "WORKER_NOT_ELIGIBLE": "Your profile does not cover this queue (its steps, site, platform"
                           " or assay). Ask an admin if you should do this work.",
}

TIMED_OUT = "your claim ran out before it was renewed; the item went back to its queue"
# How a lease ended, when no person's action says more (a sentence's subject).
ENDINGS: dict[str, str] = {
    "FORCED_EXPIRY": "an admin ended your claim; the item went back to its queue",
    "HELD": "it was put on hold",
    "CANCELED": "its work was canceled",
    "REQUEUED": "it was put back in a queue",
}
# What the person who ended it did (their name comes first).
ACTION_WORDS: dict[str, str] = {
    "expire_queue_lease": "ended your claim; the item went back to its queue",
    "place_execution_hold": "put the item on hold",
    "cancel_subject_execution": "canceled the item's work",
    "requeue_subject": "put the item back in a queue",
}
OWN_ACTIONS = {"release_queue_lease", "fail_queue_execution", "complete_queue_execution"}


def retry_choices(roles: frozenset[str] | set[str]) -> list[tuple[str, str, str]]:
    """(class, words, what becomes of the item) of the classes this person may record a
    failure with: the last is what the failure form asks them to confirm."""
    def after(c: RetryClass) -> str:
        if c in TRANSIENT_CLASSES:  # the attempt limit may end it instead (policy.attempt_limit)
            return f"{AFTER_FAILURE['FAILED_RETRYABLE']}, unless this was its last attempt"
        return AFTER_FAILURE["HELD" if c == RetryClass.BUSINESS_RULE_HOLD else "FAILED_TERMINAL"]

    return [(c.value, RETRY_CLASS_WORDS[c], after(c)) for c in failure_classes_for(roles)]


def step_label(action_key: str | None, config: dict[str, Any] | None = None) -> str:
    """A step in words: the queue configuration's label for it if it has one, else the key
    made readable ("wetlab.extract_dna" -> "Wetlab: extract dna")."""
    if not action_key:
        return ""
    labels = (config or {}).get("next_action_labels") or {}
    if isinstance(labels, dict) and isinstance(labels.get(action_key), str):
        return labels[action_key]
    parts = [p.replace("_", " ").replace("-", " ").strip() for p in action_key.split(".")]
    text = ": ".join(p for p in parts if p)
    return text[:1].upper() + text[1:]


# Where a failed or held item stands afterwards, as the person who reported it reads it.
AFTER_FAILURE = {
    "FAILED_RETRYABLE": "it goes back to its queue to be tried again after a pause",
    "FAILED_TERMINAL": "it will not be tried again; QA sees it among the dead letters",
    "HELD": "it is on hold until QA releases it",
}


def state_words(state: str | None) -> str:
    return AFTER_FAILURE.get(state or "", f"now {state}")


def template_words(code: str) -> str:
    """What a template's objects are, in words ("content/material/extracted_sample/1.0" ->
    "extracted sample")."""
    parts = code.split("/")
    return (parts[2] if len(parts) >= 3 else code).replace("_", " ")


def bench_refusal(code: str, message: str, details: dict[str, Any] | None = None) -> str:
    # an expired claim too: "The lease has expired" sat over "an admin ended your claim"
    if code in ("LEASE_NOT_ACTIVE", "LEASE_EXPIRED"):
        return ended_claim(details or {})
    if code == "MAX_LEASES_REACHED":  # the person's own limit, in their words
        d = details or {}
        count = (f"{d['held']} of the {d['limit']} items" if "held" in d and "limit" in d
                 else "as many items as")
        return (f"You already hold {count} you may hold at once. Complete or release one in"
                " My work, then try again.")
    if code == "WORKER_NOT_ELIGIBLE" and (details or {}).get("scope_field"):
        d = details or {}
        # the item, not the queue, is outside what the person takes
        yours = ", ".join(d.get("worker_values") or []) or "no"
        return (f"This item's {d['scope_field']} is {d.get('item_value') or 'not given'}; you"
                f" take {yours} items only. Ask an admin if you should do this work.")
    return BENCH_REFUSALS.get(code, message)


def ended_claim(details: dict[str, Any]) -> str:
    """Why an action on a claim that has ended did nothing, from the claim's own record (an
    older page or another tab: often the person ended it themselves)."""
    status, reason = details.get("lease_status"), details.get("release_reason") or ""
    if status == "COMPLETED":
        what = "it was already completed"
    elif status == "RELEASED" and reason in RETRY_CLASS_WORDS:
        what = "a failure was already recorded for it"
    elif status == "RELEASED":
        what = "it was already released back to its queue"
    elif status == "EXPIRED" and not reason.startswith("FORCED_EXPIRY"):
        what = TIMED_OUT
    else:
        what = ENDINGS.get(reason.partition(":")[0]) or "its claim had ended"
    moment = parse_ts_or_none(details.get("released_at"))
    at = f" ({local_clock(moment)})" if moment else ""
    return f"This item is no longer yours: {what}{at}. Nothing more was done."


def lost_notice(row: dict[str, Any], username: str) -> dict[str, Any] | None:
    """What a person is told about a lease of theirs that ended without them (by whom, why),
    or None when they ended it themselves."""
    props = row.get("props") or {}
    by, action = row.get("executed_by"), row.get("action_key")
    if action in OWN_ACTIONS and by == username:
        return None
    when = props.get("released_at") or props.get("expires_at")
    reason = props.get("release_reason") or ""
    if props.get("status") == "ACTIVE" or reason == "HEARTBEAT_TIMEOUT":
        # Not renewed in time; the sweeper (whoever ran it) only wrote that down.
        return {"row": row, "what": TIMED_OUT, "by": None, "why": None, "when": when}
    if action in ACTION_WORDS and by:
        # a person as the record named them when they acted (RULES.md#evidence)
        return {"row": row, "what": ACTION_WORDS[action],
                "by": row.get("executed_by_name") or by, "why": row.get("reason"),
                "when": when}
    return {"row": row, "what": ENDINGS.get(reason.partition(":")[0]) or "your claim ended",
            "by": None,
            "why": row.get("reason"), "when": when}


def lost_clause(notice: dict[str, Any]) -> str:
    """What ended a lost claim, as a clause: "Sam Rivera put it on hold", "It ran out"."""
    what = str(notice.get("what") or "")
    return f"{notice['by']} {what}" if notice.get("by") else what[:1].upper() + what[1:]


def standing_notice(standing: dict[str, Any] | None) -> dict[str, Any] | None:
    """Whether this person may take new work, in words, with who changed it and why."""
    if not standing or standing.get("status") not in ("DRAINING", "DISABLED", "RETIRED"):
        return None
    what = {
        "DRAINING": "An admin has paused new work for you: finish or release what you hold;"
                    " you cannot claim more until they let you again.",
        "DISABLED": "An admin has stopped your work here: you cannot claim, renew or finish"
                    " items until they let you again.",
        "RETIRED": "Your worker has been retired: you cannot take work with it.",
    }[standing["status"]]
    return {"what": what, "by": standing.get("executed_by"), "why": standing.get("reason"),
            "when": standing.get("executed_at")}


# Why a scanned item's state keeps it out of the queue, in the bench's words.
FINISHED_WORDS = {
    "COMPLETED": "It is finished: its work was completed",
    "CANCELED": "Its work was canceled",
    "FAILED_TERMINAL": "It failed for good; QA decides what happens to it (dead letters)",
}
STATE_WORDS = {
    "HELD": "It is on hold",
    "PENDING": "It has not been sent to any queue yet",
    "WAITING_EXTERNAL": "It is waiting for a result from outside the lab's queues",
    "RUNNING": "Someone is working on it",
}
# Reasons another one already says in better words.
_SAID_BY = {"NEXT_QUEUE_KEY_MISSING": "TERMINAL_STATE", "STATE_NOT_ELIGIBLE": "TERMINAL_STATE"}


def scan_reasons(diagnostics: Any, mine: str | None = None) -> list[dict[str, Any]]:
    """Why a scanned item is not claimable, for the bench: who has it (a name, not an EUID)
    and until when, when a retry or the item is due (a time the template renders humanely);
    other reasons in the engine's words."""
    env = diagnostics.execution or {}
    lease = (diagnostics.active_lease or {}).get("props") or {}
    codes = {r.code for r in diagnostics.reasons}
    out = []
    for reason in diagnostics.reasons:
        if _SAID_BY.get(reason.code) in codes or (
                reason.code == "STATE_NOT_ELIGIBLE" and "ACTIVE_HOLD" in codes):
            continue
        if reason.code == "TERMINAL_STATE":
            out.append({"code": reason.code, "text": FINISHED_WORDS.get(
                diagnostics.state, reason.message.rstrip(".")), "when": None})
        elif reason.code == "STATE_NOT_ELIGIBLE" and diagnostics.state in STATE_WORDS:
            out.append({"code": reason.code, "text": STATE_WORDS[diagnostics.state],
                        "when": None})
        elif reason.code == "ACTIVE_LEASE" and mine and lease.get("worker_lookup_euid") == mine:
            out.append({"code": reason.code, "text": "You already have it: your claim ends",
                        "when": lease.get("expires_at"), "mine": True})
        elif reason.code == "ACTIVE_LEASE":
            who = (diagnostics.active_lease or {}).get("worker_name") or "Another worker"
            out.append({"code": reason.code, "text": f"{who} is working on it; their"
                        " claim ends", "when": lease.get("expires_at")})
        elif reason.code == "RETRY_WINDOW_NOT_REACHED":
            out.append({"code": reason.code, "text": "It failed and waits to be retried,"
                        " due", "when": env.get("retry_at")})
        elif reason.code == "NOT_READY_YET":
            out.append({"code": reason.code, "text": "It is not ready yet: it becomes ready",
                        "when": env.get("ready_at")})
        else:
            out.append({"code": reason.code, "text": reason.message.rstrip("."), "when": None})
    return out


def reasons_said(reasons: list[dict[str, Any]]) -> str:
    """``scan_reasons`` as one sentence, for a message: each time as a person reads it ("in
    9 min (14:10 UTC)"), never an EUID or a raw instant."""
    from bloomops.web.timewords import relative

    def said(r: dict[str, Any]) -> str:
        moment = parse_ts_or_none(r.get("when"))
        return r["text"] + (f" {relative(moment)} ({local_clock(moment)})" if moment else "")

    return "; ".join(said(r) for r in reasons) + "."


def told_apart(subject: dict[str, Any]) -> str:
    """One of several subjects a label means, as a person tells them apart: "Z-MX-2 (Tube 7,
    READY in extraction, sfo, registered 12 Nov 09:14 UTC)"."""
    where = f" in {subject['queue_key']}" if subject.get("queue_key") else ""
    site = f", {subject['site']}" if subject.get("site") else ""
    made = subject.get("created_dt")
    when = f", registered {local_clock(made)}" if made else ""
    return (f"{subject['euid']} ({subject.get('name') or 'no name'},"
            f" {subject.get('state') or 'not in a queue'}{where}{site}{when})")


# A form's text fields as the console names them in a refusal: the engine names a field by
# its key ("reason is required."), which is the API's word, not the person's.
FIELD_WORDS: dict[str, tuple[str, str]] = {
    "reason": ("a reason", "The reason"),
    "error_message": ("what went wrong", "What went wrong"),
    "display_name": ("a display name", "The display name"),
}


def field_refusal(problem: dict[str, Any]) -> str:
    """One problem of a refusal as the console says it: a text field left blank or too long
    in the person's words ("Give a reason: spaces alone are not one."), any other as the
    engine says it (its words for the two: fields.required_words, too_long_words)."""
    field, message = problem.get("field"), str(problem.get("message") or "")
    if isinstance(field, str) and field.startswith(RESULT_FIELD):
        # a step's result: the person reads its label; the key beside it is the API's
        return message.replace(f" ({field.removeprefix(RESULT_FIELD)})", "", 1)
    if field not in FIELD_WORDS:
        return message
    asked, called = FIELD_WORDS[field]
    if message == required_words(field):
        return f"Give {asked}: left blank or spaces alone, it is not one."
    if (most := _most_of(field, message)) is not None:
        return f"{called} is too long: at most {most} characters."
    return message


def _most_of(field: str, message: str) -> int | None:
    """The length a too-long refusal names (any field's own, read from the engine's words)."""
    marker = 987654321
    said = re.fullmatch(re.escape(too_long_words(field, marker)).replace(
        str(marker), "([0-9]+)"), message)
    return int(said.group(1)) if said else None
