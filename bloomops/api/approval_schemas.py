"""Request schemas of the approval actions (docs/API.md, "Approvals"). The gated action's
own fields travel as ``parameters`` and are checked by the engine against that action."""

from typing import Any, Literal

from pydantic import Field

from bloomops.accounts.signatures import MAX_PASSWORD_LENGTH
from bloomops.api.action_schemas import ActionEnvelope, Id, required_text
from bloomops.api.text_schemas import ReadableData
from bloomops.execution.actions.fields import REASON_MAX
from bloomops.execution.approvals import GATED_ACTIONS
from bloomops.execution.states import DECISIONS


class RequestApprovalIn(ActionEnvelope):
    subject_euid: Id
    action_key: Literal[tuple(sorted(GATED_ACTIONS))] = Field(  # type: ignore[valid-type]
        description="The gated action to perform once approved.")
    parameters: ReadableData | None = Field(None, description=(
        "The gated action's own payload fields (e.g. reason), as its request would carry"
        " them; hold_euid and queue_key go in the envelope."))
    reason: str = required_text(REASON_MAX, "Why the action should be approved.")


class DecideApprovalIn(ActionEnvelope):
    approval_euid: Id
    decision: Literal[DECISIONS]  # type: ignore[valid-type]
    reason: str = required_text(REASON_MAX)
    password: str = Field(min_length=1, max_length=MAX_PASSWORD_LENGTH, description=(
        "The decider's own password, re-entered: the electronic signature (a bearer token"
        " alone is not a signature). Never stored, hashed into the request or logged;"
        " wrong passwords count toward the sign-in lockout."))


class CancelApprovalIn(ActionEnvelope):
    approval_euid: Id
    reason: str = required_text(REASON_MAX, "Why the request is withdrawn.")


APPROVAL_SCHEMAS: dict[str, type[ActionEnvelope]] = {
    "request_approval": RequestApprovalIn, "decide_approval": DecideApprovalIn,
    "cancel_approval": CancelApprovalIn,
}


# ------------------------------------------------------------------ reads (GET /approvals)
from ninja import Schema  # noqa: E402

from bloomops.api.schemas import query_integer, query_text  # noqa: E402
from bloomops.execution.approvals import STATUSES  # noqa: E402


class ApprovalFilters(Schema):
    status: Literal[STATUSES] | None = Field(None, description=(  # type: ignore[valid-type]
        "Effective status: REQUESTED waits for a decision; EXPIRED is REQUESTED past"
        " expires_at."))
    subject_euid: str | None = query_text()
    limit: query_integer(200, 1, 1000)  # type: ignore[valid-type]


class ApprovalOut(Schema):
    approval_euid: str
    status: str
    action_key: str | None
    rule: str | None
    parameters: dict[str, Any]
    reason: str | None
    subject_euid: str | None
    subject_state: str | None
    hold_euid: str | None
    hold_euids: list[str]
    queue_key: str | None
    requested_by: str | None
    requested_at: str | None
    expires_at: str | None
    subject_revision_at_request: int | None
    decision: str | None
    decided_by: str | None
    decided_at: str | None
    decision_reason: str | None
    signature: dict[str, Any] | None = Field(None, description=(
        "The electronic signature of the decision: meaning, signer, signer_name, signed_at,"
        " method (password re-entry), reason."))
    canceled_by: str | None = Field(None, description=(
        "CANCELED: who withdrew the request (the console says Withdrawn), when and why."))
    canceled_at: str | None
    cancel_reason: str | None
