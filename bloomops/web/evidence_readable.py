"""An evidence bundle (RULES.md#evidence) as people read it: what was done to the subject,
by whom, when and why, its holds, approvals with their signatures, attempts and outputs.

It reads the document of a file someone uploaded, so nothing in it is trusted: every value
is taken only when it has the shape a bundle gives it (text, a number, a mapping), and is
otherwise shown as missing. The page says beside it whether the file verified."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from bloomops.execution import clock
from bloomops.execution.approvals import effective_status
from bloomops.execution.chain import CHAIN
from bloomops.execution.context import action_name
from bloomops.web.templatetags.approvals_ui import (
    DECIDED,
    approval_status_words,
    asked_for,
    terms,
)


def _text(value: Any) -> str:
    """A value a page may show: text or a number as it is, anything else as nothing."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value) if isinstance(value, str | int | float) else ""


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _entries(doc: dict[str, Any], section: str) -> list[dict[str, Any]]:
    value = doc.get(section)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _failure(error_class: Any, message: Any) -> str:
    """A failure as its records say it: "CLASS: message", either alone when the other is
    missing (concat_ws in ACTION_WHY)."""
    return ": ".join(t for t in (_text(error_class), _text(message)) if t)


def action_why(record: dict[str, Any]) -> str:
    """Why an action was taken, as its record says: the reason given, else a failure's class
    and message (selectors.base.ACTION_WHY, the database's form of this rule)."""
    if isinstance(record.get("reason"), str):
        return record["reason"]
    captured = _map(record.get("captured_data"))
    if captured.get("error_message") is None:
        return ""
    return _failure(captured.get("error_class"), captured.get("error_message"))


@dataclass
class Readable:
    subject: dict[str, str]
    actions: list[dict[str, str]] = field(default_factory=list)
    holds: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, str]] = field(default_factory=list)
    dead_letters: list[dict[str, str]] = field(default_factory=list)
    outputs: list[dict[str, str]] = field(default_factory=list)


def _action(entry: dict[str, Any]) -> dict[str, str]:
    """A record as Activity reads it: a decision by which way it went and what it decided;
    an action a decision ran with whose request it was (the approver's name alone read as if
    they had released the hold of their own accord, with the asker's words)."""
    record = _map(entry.get("record"))
    result = _map(record.get("result"))
    key = _text(record.get("action_key") or entry.get("action_key"))
    by, name = _text(record.get("executed_by")), _text(record.get("executed_by_name"))
    what = action_name(key) or "" if key else ""
    asked = _map(result.get("approval"))
    if key == "decide_approval" and _text(result.get("approval_status")) in DECIDED:
        what = DECIDED[_text(result["approval_status"])] + asked_for(
            _text(result.get("gated_action_key")))
        asked = {"requested_by": result.get("requested_by"),
                 "approval_euid": result.get("approval_euid")}
    return {"euid": _text(entry.get("euid")), "when": _text(record.get("executed_at")),
            "who": f"{name} ({by})" if name and by and name != by else by or name,
            "action_key": key, "what": what, "why": action_why(record),
            "asked_by": _text(asked.get("requested_by")),
            "approval": _text(asked.get("approval_euid")),
            "state": _text(result.get("state")),
            "seal": _text(_map(record.get(CHAIN)).get("sha256"))[:16]}


def _hold(entry: dict[str, Any]) -> dict[str, Any]:
    p = _map(entry.get("properties"))
    on_approval = _map(p.get("released_on_approval"))
    return {"euid": _text(entry.get("euid")), "code": _text(p.get("hold_code")),
            "reason": _text(p.get("reason")), "placed_at": _text(p.get("placed_at")),
            "placed_by": _text(p.get("placed_by_lookup_euid")), "status": _text(p.get("status")),
            "released_at": _text(p.get("released_at")),
            "released_by": _text(p.get("released_by_lookup_euid")),
            "release_reason": _text(p.get("release_reason")),
            "approval": _text(on_approval.get("approval_euid")),
            "asked_by": _text(on_approval.get("requested_by"))}


def _approval(entry: dict[str, Any], now: datetime) -> dict[str, Any]:
    """An approval as the inbox says it: a request past its expiry EXPIRED (read, never
    stored), one its asker took back WITHDRAWN with who, when and why, and the terms the
    signer signed for."""
    p = _map(entry.get("properties"))
    sig = _map(p.get("signature"))
    key = _text(p.get("action_key"))
    try:
        status = effective_status(p, now)
    except ValueError:  # an expiry no one can read: as stored
        status = _text(p.get("status"))
    return {"euid": _text(entry.get("euid")), "action_key": key,
            "what": action_name(key) or "" if key else "",
            "status": approval_status_words(_text(status)),
            "expires_at": _text(p.get("expires_at")),
            "terms": terms(SimpleNamespace(props=p)),
            "canceled_by": _text(p.get("canceled_by")),
            "canceled_at": _text(p.get("canceled_at")),
            "cancel_reason": _text(p.get("cancel_reason")),
            "requested_by": _text(p.get("requested_by")),
            "requested_at": _text(p.get("requested_at")), "reason": _text(p.get("reason")),
            "decided_by": _text(p.get("decided_by")), "decided_at": _text(p.get("decided_at")),
            "decision_reason": _text(p.get("decision_reason")),
            "signature": {name: _text(sig.get(name)) for name in (
                "signer", "signer_name", "meaning", "method", "signed_at")} if sig else None}


def _attempt(entry: dict[str, Any]) -> dict[str, str]:
    p = _map(entry.get("properties"))
    return {"euid": _text(entry.get("euid")), "number": _text(p.get("attempt_number")),
            "status": _text(p.get("status")), "queue": _text(p.get("queue_lookup_key")),
            "worker": _text(p.get("worker_lookup_euid")), "started": _text(p.get("started_at")),
            "finished": _text(p.get("finished_at")),
            "error": _failure(p.get("error_class"), p.get("error_message"))}


def _named(entry: dict[str, Any], *fields: str) -> dict[str, str]:
    p = _map(entry.get("properties"))
    return {"euid": _text(entry.get("euid")), "name": _text(entry.get("name")),
            **{f: _text(p.get(f)) for f in fields}}


def readable(doc: dict[str, Any]) -> Readable:
    """What a bundle's document records, in the order it records it."""
    subject = _map(doc.get("subject"))
    return Readable(
        subject={"euid": _text(subject.get("euid")), "name": _text(subject.get("name")),
                 "template_code": _text(subject.get("template_code")),
                 "created": _text(subject.get("created_dt"))},
        actions=[_action(e) for e in _entries(doc, "action_records")],
        holds=[_hold(e) for e in _entries(doc, "holds")],
        approvals=[_approval(e, clock.now()) for e in _entries(doc, "approvals")],
        attempts=[_attempt(e) for e in _entries(doc, "execution_records")],
        dead_letters=[_named(e, "queue_lookup_key", "dead_lettered_at", "error_class",
                             "error_message", "resolution_state", "resolved_by_lookup_euid",
                             "resolved_at", "resolution_reason")
                      for e in _entries(doc, "dead_letters")],
        outputs=[_named(e) for e in _entries(doc, "outputs")],
    )
