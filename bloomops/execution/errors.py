"""Stable refusal codes. Every refusal of the executor is one of these, carries a readable
message for an operator, maps to one HTTP status for the API, and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

HTTP_STATUS: dict[str, int] = {
    "VALIDATION_ERROR": 400,
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "STATE_CONFLICT": 409,
    "REVISION_CONFLICT": 409,
    "IDEMPOTENCY_CONFLICT": 409,
    "LEASE_EXPIRED": 409,
    "LEASE_NOT_OWNED": 409,
    "LEASE_NOT_ACTIVE": 409,
    "NOT_VISIBLE": 409,
    "NO_WORK": 409,
    "WORKER_UNAVAILABLE": 409,
    "WORKER_NOT_ELIGIBLE": 409,
    "MAX_LEASES_REACHED": 409,
    "WORKER_LIMIT_REACHED": 409,
    "OUTSIDE_PROFILE": 403,
    "QUEUE_DISABLED": 409,
    "SUBJECT_HELD": 409,
    "HOLD_NOT_ACTIVE": 409,
    "CONCURRENT_UPDATE": 409,
    "INVALID_ENVELOPE": 409,
    "OUTPUT_NOT_ALLOWED": 400,
    "SUBJECT_TEMPLATE_MISMATCH": 409,
    "SUBJECT_ALREADY_ROUTED": 409,
    "SUBJECT_TERMINAL": 409,
    "SUBJECT_OUT_OF_SCOPE": 409,
    "EVIDENCE_MISMATCH": 409,
    "QUEUE_EXISTS": 409,
    "QUEUE_IN_USE": 409,
    "QUEUE_NOT_MANAGED": 409,
    "REPLACEMENT_REQUIRED": 409,
    "QUEUE_HEAD_MISMATCH": 409,
    "APPROVAL_REQUIRED": 409,
    "APPROVAL_POLICY_ERROR": 409,
    "APPROVAL_NOT_NEEDED": 409,
    "APPROVAL_PENDING": 409,
    "APPROVAL_NOT_PENDING": 409,
    "APPROVAL_EXPIRED": 409,
    "APPROVAL_TAMPERED": 409,
    "SELF_APPROVAL": 403,
    "SIGNATURE_INVALID": 403,
    "NEXT_QUEUE_NOT_ALLOWED": 409,
}

# The refusals of a request whose page or caller saw an older subject (expected_state,
# expected_revision): the person must see what changed before deciding again.
STALE_CODES = frozenset({"STATE_CONFLICT", "REVISION_CONFLICT"})
# The refusals of an action on a claim that is no longer the caller's (ended, expired, taken
# over, its subject changed or held): what it would have reported goes nowhere.
CLAIM_GONE_CODES = frozenset({"LEASE_EXPIRED", "LEASE_NOT_OWNED", "LEASE_NOT_ACTIVE",
                              "STATE_CONFLICT", "REVISION_CONFLICT", "SUBJECT_HELD",
                              "NOT_VISIBLE"})

# What an operator reads when the code comes back (the UI shows these, the API returns
# them as the message when the raiser gave none).
PLAIN: dict[str, str] = {
    "VALIDATION_ERROR": "The request is incomplete or invalid.",
    "UNAUTHENTICATED": "Sign in or send a valid API token.",
    "FORBIDDEN": "Your role may not perform this action.",
    "NOT_FOUND": "No such object.",
    "STATE_CONFLICT": "This subject changed after you last read it (state differs).",
    "REVISION_CONFLICT": "This subject changed after you last read it (revision differs).",
    "IDEMPOTENCY_CONFLICT": "This request key was already used with different content.",
    "LEASE_EXPIRED": "The lease has expired; the item may already be claimed by someone else.",
    "LEASE_NOT_OWNED": "This lease belongs to another worker.",
    "LEASE_NOT_ACTIVE": "This lease is no longer active.",
    "NOT_VISIBLE": "The subject is not available in that queue right now.",
    "NO_WORK": "There is no claimable work in the queue right now.",
    "WORKER_UNAVAILABLE": "The worker is disabled, retired or draining and may not take work.",
    "WORKER_NOT_ELIGIBLE": "The worker's capabilities or scopes do not cover this queue.",
    "MAX_LEASES_REACHED": "The worker already holds as many leases as it may.",
    "WORKER_LIMIT_REACHED": "This account already has as many workers as one account may"
                            " register: retire those no longer used.",
    "OUTSIDE_PROFILE": "The worker's capabilities, scopes or lease limit reach past what its"
                       " account's profile allows.",
    "QUEUE_DISABLED": "The queue is disabled.",
    "SUBJECT_HELD": "The subject is on hold; only release of the hold or cancel is allowed.",
    "HOLD_NOT_ACTIVE": "The hold is not active.",
    "CONCURRENT_UPDATE": "Another change to the same objects happened at the same time; retry.",
    "INVALID_ENVELOPE": "The subject's execution envelope has a field the engine cannot read;"
                        " an operator can requeue or cancel it.",
    "OUTPUT_NOT_ALLOWED": "This step may not produce objects of that kind.",
    "SUBJECT_TEMPLATE_MISMATCH": "The queue does not take objects of this kind (template).",
    "SUBJECT_ALREADY_ROUTED": "The subject is already in a queue's work; only a PENDING or"
                              " new subject can be routed.",
    "SUBJECT_TERMINAL": "The subject's work is finished or canceled; an operator can requeue"
                        " it instead.",
    "SUBJECT_OUT_OF_SCOPE": "The subject's site, platform or assay is outside what the queue"
                            " serves, so it would never be seen there.",
    "EVIDENCE_MISMATCH": "The subject's history is not the one the evidence bundle describes"
                         " (it changed, or the hash is of another bundle); export again.",
    "QUEUE_EXISTS": "A queue with this key already exists.",
    "QUEUE_IN_USE": "Items are routed to this queue's key, or other queues send items to it:"
                    " a new key would strand them. Keep the key, or route them on first.",
    "QUEUE_NOT_MANAGED": "This queue belongs to another system (bloomops did not create it);"
                         " bloomops does not change it.",
    "REPLACEMENT_REQUIRED": "A queue's key and subject templates are fixed; replace the queue"
                            " (replace_queue) to change them.",
    "QUEUE_HEAD_MISMATCH": "This queue runs work strictly in order: only the item at its head"
                           " may be claimed now.",
    "APPROVAL_REQUIRED": "This action needs a second person's approval: request approval"
                         " (the details say what to request).",
    "APPROVAL_POLICY_ERROR": "The approval policy could not be evaluated, so the action is"
                             " refused; an admin must fix the approval settings.",
    "APPROVAL_NOT_NEEDED": "This action does not need an approval; perform it directly.",
    "APPROVAL_PENDING": "An approval of this action on this subject is already waiting.",
    "APPROVAL_NOT_PENDING": "This approval request was already decided or withdrawn.",
    "APPROVAL_EXPIRED": "This approval request has expired; request it again.",
    "APPROVAL_TAMPERED": ("This approval is not the request its sealed record says was made:"
                          " it was changed outside bloomops. Nothing was done; an admin"
                          " should look at the database."),
    "SELF_APPROVAL": "An approval needs a second person: you cannot decide your own request.",
    "SIGNATURE_INVALID": "The password does not match: the decision was not signed.",
    "NEXT_QUEUE_NOT_ALLOWED": "This queue's flow does not move items to that queue.",
}


class ActionError(Exception):
    def __init__(self, code: str, message: str | None = None, **details: Any) -> None:
        if code not in HTTP_STATUS:
            raise ValueError(f"unknown error code {code}")
        self.code = code
        self.message = message or PLAIN[code]
        self.details = details
        super().__init__(f"{code}: {self.message}")

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    def as_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}

    def problems(self) -> list[dict[str, Any]]:
        """Each problem the refusal names, as {"field", "message"}: a VALIDATION_ERROR of
        several fields (Problems) lists them; a claim's WORKER_NOT_ELIGIBLE lists its
        reasons as texts (the API's older shape, kept for its callers); any other is one."""
        listed = self.details.get("problems")
        if not isinstance(listed, list) or not listed:
            return [{"field": self.details.get("field"), "message": self.message}]
        return [p if isinstance(p, dict) else {"field": None, "message": str(p)}
                for p in listed]


class Problems:
    """The VALIDATION_ERROR refusals of several fields, gathered so that one answer says all
    of them (a form with three mistakes was refused three times over). Any other refusal is
    not about a field's value and ends the check at once."""

    def __init__(self) -> None:
        self.found: list[ActionError] = []

    @contextmanager
    def field(self) -> Iterator[None]:
        try:
            yield
        except ActionError as err:
            if err.code != "VALIDATION_ERROR":
                raise
            # a check that gathered several itself: each said on its own, not as one line
            self.found.extend([ActionError("VALIDATION_ERROR", p["message"], field=p["field"])
                               for p in err.details.get("problems") or []] or [err])

    def raise_any(self) -> None:
        """Nothing found: nothing. One: that refusal. Several: one VALIDATION_ERROR saying
        each, its ``field`` the first one's and ``problems`` every one's field and message."""
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            first = self.found[0]
            raise ActionError(
                "VALIDATION_ERROR", " ".join(err.message for err in self.found),
                **{**first.details, "problems": [
                    {"field": err.details.get("field"), "message": err.message}
                    for err in self.found]})
