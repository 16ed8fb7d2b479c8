"""Two-person approvals (RULES.md#approvals): which actions need a second person (a pure
rule over what one read returns), the gate the executor runs before every handler's run,
and an approval's effective status (REQUESTED past its expiry reads EXPIRED).

The gate is fail-closed: whatever goes wrong while deciding whether an approval is needed
refuses the action with APPROVAL_POLICY_ERROR, so a broken setting never lets a gated
action through."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from bloomops.execution.binding import FAILURE_HOLD_CODE, sealed_hold_code
from bloomops.execution.chain import another_writers, seal_intact
from bloomops.execution.envelope import parse_ts, ts
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import REL, Obj
from bloomops.execution.sql import hold_active
from bloomops.execution.verification import ended_unrecorded, requeued_unrecorded
from bloomops.tapdb.db import fetch_all
from bloomops.tapdb.tenancy import tenant_of

APPROVAL_CODE = "data/execution/approval/1.0"

# The rules a lab can switch on (BLOOMOPS_APPROVAL_RULES), each naming the one action it gates.
RULES: dict[str, str] = {
    "release_integrity_hold": "release_execution_hold",
    "requeue_dead_letter": "requeue_subject",
    "cancel_integrity_held": "cancel_subject_execution",
}
GATED_ACTIONS = frozenset(RULES.values())
# What an operator reads when a rule refuses an action.
RULE_TEXT: dict[str, str] = {
    "release_integrity_hold": "Releasing an integrity hold",
    "requeue_dead_letter": "Requeueing a dead-lettered subject",
    "cancel_integrity_held": "Cancelling a subject under an integrity hold",
}
STATUSES = ("REQUESTED", "APPROVED", "REJECTED", "EXPIRED", "CANCELED")


def check_settings() -> None:
    """Refuse to start with an approval setting the gate could not use."""
    rules = settings.BLOOMOPS_APPROVAL_RULES
    if not isinstance(rules, list | tuple) or not all(r in RULES for r in rules):
        raise ImproperlyConfigured(
            f"BLOOMOPS_APPROVAL_RULES: {rules!r} names a rule that does not exist; known:"
            f" {', '.join(RULES)} (or none).")
    codes = settings.BLOOMOPS_INTEGRITY_HOLD_CODES
    if not isinstance(codes, list | tuple) or not all(isinstance(c, str) and c for c in codes):
        raise ImproperlyConfigured("BLOOMOPS_INTEGRITY_HOLD_CODES must be hold codes.")
    # a code misspelt here ("QC-FAIL" for QC_FAIL) is a hold nobody places: QC_FAIL holds
    # would need no second person, and nothing would say so. One the operators' list does
    # not hold at all may be meant (Bloom's holds, a retired code) and is taken.
    for code in codes:
        meant = misspelt_hold_code(code)
        if meant:
            raise ImproperlyConfigured(
                f"BLOOMOPS_INTEGRITY_HOLD_CODES: {code} is spelt almost like the hold code"
                f" {meant} (BLOOMOPS_HOLD_CODES), which would then need no second person:"
                " write it as the hold code is spelt.")
    ttl = settings.BLOOMOPS_APPROVAL_TTL_SECONDS
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
        raise ImproperlyConfigured("BLOOMOPS_APPROVAL_TTL_SECONDS must be a positive integer.")


def misspelt_hold_code(code: str) -> str | None:
    """The hold code of BLOOMOPS_HOLD_CODES that ``code`` is spelt almost like but is not
    (QC-FAIL, QCFAIL, QC_FIAL for QC_FAIL), or None."""
    known = settings.BLOOMOPS_HOLD_CODES
    code = code.strip().upper()
    if code in known:
        return None
    bare = re.sub(r"[^A-Z0-9]", "", code)
    alike = [k for k in known if re.sub(r"[^A-Z0-9]", "", k) == bare]
    return (alike or difflib.get_close_matches(code, known, n=1, cutoff=0.85) or [None])[0]


@dataclass(frozen=True)
class SubjectFlags:
    """What the rules look at: the subject's active holds (euid -> hold code) and whether it
    has a dead letter no requeue has closed (OPEN, or closed by a cancel: cancelling and
    then requeueing a dead letter went round the second person); ``hold_uids`` (euid ->
    uid) for linking an approval to them."""

    active_holds: dict[str, str]
    dead_lettered: bool
    hold_uids: dict[str, int] = field(default_factory=dict)
    # holds whose code is not the one their placement's sealed record says (or whose record
    # no longer matches its seal): each gates as an integrity hold, fail-closed
    doubted: frozenset[str] = frozenset()


# With each active hold, the first record on the subject that names it (the one that made
# it: a hold placed by an operator, or by a worker's failure; a sealed one before another
# writer's, which anyone can insert): a hold's code is a snapshot
# any writer of the database can rewrite, those records are sealed. Found by what the
# record sealed, not by its row's action column, which its seal does not cover. A hold read
# as ended that no record ended is held active here (verification.ended_unrecorded).
_FLAGS = f"""
SELECT x.uid, x.euid, l.relationship_type AS rel,
       x.json_addl->'properties'->>'hold_code' AS hold_code, made.json_addl AS placed,
       made.is_deleted AS placed_deleted, NOT {hold_active()} AS unrecorded_end
FROM generic_instance_lineage l
JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
     AND x.tenant_id = %(tenant)s
LEFT JOIN LATERAL (
  SELECT r.json_addl, r.is_deleted FROM generic_instance_lineage e
  JOIN generic_instance r ON r.uid = e.parent_instance_uid AND r.tenant_id = %(tenant)s
  WHERE l.relationship_type = '{REL["subject_hold"]}' AND e.child_instance_uid = %(subject)s
    AND e.relationship_type = '{REL["executed_on"]}' AND NOT e.is_deleted
    AND r.type = 'execution_queue' AND r.json_addl->'result'->>'hold_euid' = x.euid
  ORDER BY r.json_addl ? 'chain' DESC, r.uid LIMIT 1) made ON true
WHERE l.parent_instance_uid = %(subject)s AND NOT l.is_deleted AND (
  (l.relationship_type = '{REL["subject_hold"]}'
   AND ({hold_active()} OR {ended_unrecorded("x", "%(subject)s")}))
  OR (l.relationship_type = '{REL["subject_dead_letter"]}'
      AND (x.json_addl->'properties'->>'resolution_state' IS DISTINCT FROM 'REQUEUED'
           OR {requeued_unrecorded("x", "%(subject)s")})))
ORDER BY x.uid"""

_MAKES_HOLDS = ("place_execution_hold", "fail_queue_execution")


def _doubted(row: dict[str, Any]) -> bool:
    """A hold whose code differs from the one the action that made it sealed; whose first
    record is deleted, no longer matches its seal or made no hold; that no record names
    (its record removed, fail-closed); or read as ended by no record. A hold another
    writer's record made (Bloom places holds on a shared database, with records of its own
    that seal nothing) has only its code."""
    record = row["placed"]
    if row["unrecorded_end"] or not isinstance(record, dict):
        return True
    if another_writers(record):
        return False
    if row["placed_deleted"] or not seal_intact(record) or (
            record.get("action_key") not in _MAKES_HOLDS):
        return True
    code = sealed_hold_code(record) if record.get("action_key") == "place_execution_hold" \
        else FAILURE_HOLD_CODE  # a failure's hold: the engine's own code, always
    return code is not None and code != (row["hold_code"] or "")


def subject_flags(subject_uid: int) -> SubjectFlags:
    """The one read of the policy."""
    rows = fetch_all(_FLAGS, {"subject": subject_uid, "tenant": tenant_of()})
    return SubjectFlags(
        active_holds={r["euid"]: r["hold_code"] or "" for r in rows
                      if r["rel"] == REL["subject_hold"]},
        dead_lettered=any(r["rel"] == REL["subject_dead_letter"] for r in rows),
        hold_uids={r["euid"]: r["uid"] for r in rows if r["rel"] == REL["subject_hold"]},
        doubted=frozenset(r["euid"] for r in rows
                          if r["rel"] == REL["subject_hold"] and _doubted(r)),
    )


def lab_rule(action_key: str, flags: SubjectFlags, hold_euid: str | None = None) -> str | None:
    """``rule_for`` under the lab's configured rules and integrity hold codes."""
    return rule_for(action_key, flags, hold_euid=hold_euid,
                    rules=list(settings.BLOOMOPS_APPROVAL_RULES),
                    integrity_codes=list(settings.BLOOMOPS_INTEGRITY_HOLD_CODES))


def rule_for(action_key: str, flags: SubjectFlags, *, hold_euid: str | None,
             rules: list[str], integrity_codes: list[str]) -> str | None:
    """The rule that makes this action need a second person, or None (pure)."""
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise ValueError(f"unknown approval rule(s) {unknown}")
    # in any case and spacing: another writer's hold of "qc_fail" is a QC_FAIL hold
    codes = {c.strip().upper() for c in integrity_codes}

    def integrity(code: str | None) -> bool:
        return (code or "").strip().upper() in codes

    for rule in rules:
        if RULES[rule] != action_key:
            continue
        if rule == "release_integrity_hold":
            released = ([hold_euid] if hold_euid else list(flags.active_holds))
            if any(integrity(flags.active_holds.get(h)) or h in flags.doubted for h in released):
                return rule
        elif rule == "requeue_dead_letter":
            if flags.dead_lettered:
                return rule
        elif rule == "cancel_integrity_held":
            if any(integrity(code) for code in flags.active_holds.values()) or flags.doubted:
                return rule
    return None


def required_rule(action_key: str, subject: Obj | None, hold_euid: str | None,
                  flags: SubjectFlags | None = None) -> str | None:
    """Whether the action on this subject needs an approval, fail-closed. ``flags``: the
    subject's, when the caller has read them already."""
    if action_key not in GATED_ACTIONS:
        return None
    try:
        if subject is None:
            raise ValueError("a gated action without its subject")
        return lab_rule(action_key, flags or subject_flags(subject.uid), hold_euid)
    except ActionError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure refuses (fail-closed)
        raise ActionError("APPROVAL_POLICY_ERROR", action_key=action_key,
                          problem=type(exc).__name__) from exc


def hold_gates(hold_code: str | None) -> frozenset[str]:
    """The actions a hold with this code puts behind a second person under the lab's rules:
    ``rule_for`` on a subject holding just that hold (for a screen listing many holds; the
    gate itself reads the subject)."""
    flags = SubjectFlags(active_holds={"hold": hold_code or ""}, dead_lettered=False)
    return frozenset(key for key in GATED_ACTIONS if lab_rule(key, flags))


def dead_letter_gate() -> str | None:
    """The words of the rule that puts requeueing any dead-lettered subject behind a second
    person under the lab's rules, or None (for a screen listing many dead letters)."""
    rule = lab_rule(RULES["requeue_dead_letter"],
                    SubjectFlags(active_holds={}, dead_lettered=True))
    return RULE_TEXT[rule] if rule else None


def gated_actions(subject_uid: int) -> dict[str, str]:
    """For a screen: each gated action that needs a second person on this subject now, with
    the words of its rule. Fail-closed: a policy that cannot be evaluated gates them all."""
    try:
        flags = subject_flags(subject_uid)
        found = {key: lab_rule(key, flags) for key in GATED_ACTIONS}
    except Exception:  # noqa: BLE001 - the engine refuses these too (APPROVAL_POLICY_ERROR)
        return {key: "The approval policy could not be evaluated" for key in GATED_ACTIONS}
    return {key: RULE_TEXT[rule] for key, rule in found.items() if rule}


def gate(ctx: Any) -> None:
    """The executor's hook, after prepare and the guards, before run: a gated action is
    refused with what to request instead (an approved one does not pass here)."""
    req = ctx.request
    rule = required_rule(req.action_key, ctx.subject, req.hold_euid)
    if rule is None:
        return
    # Exactly the fields of the request_approval to send instead, as they may be sent (with
    # an idempotency key of its own): its why is the gated action's until the caller says
    # another.
    what = RULE_TEXT.get(rule, "This action")
    ask = {"subject_euid": ctx.subject.euid, "hold_euid": req.hold_euid,
           "queue_key": req.queue_key, "action_key": req.action_key,
           "parameters": dict(req.payload)}
    if isinstance(req.payload.get("reason"), str):
        ask["reason"] = req.payload["reason"]
    raise ActionError("APPROVAL_REQUIRED", f"{what} needs a second person's approval: ask"
                      " for one (Ask for approval, on the subject's page).", rule=rule,
                      request=ask)


def expires_at(now: datetime) -> str:
    return ts(now + timedelta(seconds=int(settings.BLOOMOPS_APPROVAL_TTL_SECONDS)))  # type: ignore[return-value]


def is_expired(props: dict[str, Any], now: datetime) -> bool:
    if props.get("status") != "REQUESTED" or not props.get("expires_at"):
        return False
    return parse_ts(props["expires_at"]) <= now


def effective_status(props: dict[str, Any], now: datetime) -> str:
    """REQUESTED past its expiry is EXPIRED: a refusal writes nothing, so expiry is read,
    never stored."""
    return "EXPIRED" if is_expired(props, now) else str(props.get("status") or "REQUESTED")
