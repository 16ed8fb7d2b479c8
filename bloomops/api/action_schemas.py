"""Request schemas of the API's actions (pydantic, through django-ninja).

They are what the API enforces, so the OpenAPI document says exactly what an action accepts:
required fields, enums, strict types (no coercion) and the engine's length and range bounds.
The few rules between fields stay the engine's to enforce (its handlers' validate); the
document states them as JSON Schema (if/then, anyOf, not). Read parameters and responses are
in ``schemas``.
"""

from copy import deepcopy
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bloomops.api.text_schemas import (
    EXACT_LINE,
    LINE,
    PROSE,
    STRIPPED_LINE,
    Properties,
    ReadableData,
)
from bloomops.execution.actions import RecordExternalResult
from bloomops.execution.actions.fields import (
    ERROR_MESSAGE_MAX,
    KEY_MAX,
    LIST_MAX,
    NAME_MAX,
    NOTE_MAX,
    REASON_MAX,
)
from bloomops.execution.context import ENVELOPE_FIELDS
from bloomops.execution.envelope import REQUEST_INSTANT_PATTERN
from bloomops.execution.states import (
    ALL_STATES,
    BIGINT_RANGE,
    PRIORITY_CLASSES,
    PRIORITY_RANGE,
    TRANSIENT_CLASSES,
    RetryClass,
)
from bloomops.text import NON_BLANK, STRIPPED_CHARS

# An instant as the engine takes it (envelope.REQUEST_INSTANT), white space around it aside.
INSTANT = rf"^[{STRIPPED_CHARS}]*{REQUEST_INSTANT_PATTERN}[{STRIPPED_CHARS}]*$"

# Enums come from the engine's vocabulary, so the document cannot drift from what it checks.
StateName = Literal[ALL_STATES]  # type: ignore[valid-type]
RetryClassName = Literal[tuple(c.value for c in RetryClass)]  # type: ignore[valid-type]
PriorityClassName = Literal[tuple(PRIORITY_CLASSES)]  # type: ignore[valid-type]

# What the engine and PostgreSQL can hold (docs/API.md, "Limits"): text within the
# engine's own bounds, revisions up to 2^31, other integers within PostgreSQL's bigint.
ID_MAX = KEY_MAX
REVISION_MAX = 2**31
BIGINT_MIN, BIGINT_MAX = BIGINT_RANGE
# "Has a character that is not white space" (text.NON_BLANK): the engine strips text and
# treats blank as missing.
# Every field of a request that is not the action's own.
REQUEST_FIELDS = ("idempotency_key", *ENVELOPE_FIELDS, "payload")


def refusal(field: str, message: str) -> PydanticCustomError:
    """A refusal that names the field it concerns when pydantic's location cannot (a model
    validator's error has none); the API's error handler reads it."""
    return PydanticCustomError("value_error", "{message}", {"field": field, "message": message})


def _integral(value: Any) -> Any:
    """JSON Schema counts 3.0 as an integer and JSON parsers hand it over as a float; take it
    as 3. Fractions, text and booleans stay refused (strict)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def integer(minimum: int, maximum: int) -> Any:
    """A bounded integer (the bounds ahead of the validator, or pydantic leaves them out of
    the JSON Schema)."""
    return Annotated[int, Field(ge=minimum, le=maximum), BeforeValidator(_integral)]


Priority = integer(*PRIORITY_RANGE) | PriorityClassName
# A blank one is no id: a claim's queue_key "" claimed from any queue.
Id = Annotated[str, Field(min_length=1, max_length=ID_MAX, pattern=NON_BLANK)]
NonEmptyText = Annotated[str, Field(min_length=1, max_length=KEY_MAX, json_schema_extra=LINE)]
# A list of keys (capabilities, scopes, template codes), as the engine bounds it.
KeyList = Annotated[list[NonEmptyText], Field(max_length=LIST_MAX)]


def text(max_length: int, description: str | None = None, *, line: bool = False) -> Any:
    """An optional text field the engine bounds to ``max_length``; ``line``: one printable
    line (the engine's ``text_field(line=True)``)."""
    return Field(None, max_length=max_length, description=description,
                 json_schema_extra=STRIPPED_LINE if line else PROSE)


def required_text(max_length: int, description: str | None = None, *,
                  line: bool = False) -> Any:
    """Required text that must not be blank (the engine's ``required`` text)."""
    return Field(min_length=1, max_length=max_length, pattern=NON_BLANK,
                 description=description, json_schema_extra=STRIPPED_LINE if line else PROSE)


class StrictSchema(BaseModel):
    """Requests are taken as typed: no number for a string, no false for 0, no extra key.
    A plain pydantic model: ninja's Schema wraps input for ORM reads, which a request body
    does not need and which would hide the body from the payload-lifting validator."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")


class ActionEnvelope(StrictSchema):
    """The request envelope (RULES.md#requests). Fields an action does not use may be omitted.
    Action-specific fields go at the top level; a field the action declares may instead be
    sent inside ``payload`` and is validated the same way (not at both places)."""

    idempotency_key: str = Field(min_length=1, max_length=ID_MAX, pattern=NON_BLANK, description=(
        "A retry with the same key and the same content returns the first response; the same"
        " key with other content is IDEMPOTENCY_CONFLICT. Matched exactly as given."),
        json_schema_extra=EXACT_LINE)
    subject_euid: Id | None = None
    worker_euid: Id | None = None
    lease_euid: Id | None = None
    hold_euid: Id | None = None
    queue_key: Id | None = None
    expected_state: StateName | None = None
    expected_revision: integer(0, REVISION_MAX) | None = None
    payload: dict[str, Any] = Field(default_factory=dict, description=(
        "The action's own fields, as an alternative to the top level (a field goes at one"
        " place or the other, not both). A required field sent only here is accepted too."))

    # Rules between fields that the engine enforces (its handlers' validate), stated as
    # JSON Schema keywords of the request body so that the document says them too.
    json_rules: ClassVar[dict[str, Any]] = {}
    # Envelope fields the action refuses (its handler's ``not_applicable``, set by
    # api/request_schemas.py): left out of the document, which says what the server takes.
    not_applicable: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema = handler(core_schema)
        body = handler.resolve_ref_schema(schema)
        props = body.get("properties", {})
        for name in cls.not_applicable:
            props.pop(name, None)
        own = {k: v for k, v in props.items() if k not in REQUEST_FIELDS}
        if "payload" in props:
            # The engine refuses payload keys the action does not declare, and a field given
            # at the top level too.
            props["payload"] = {**props["payload"], "properties": own,
                                "additionalProperties": False}
        rules = deepcopy(cls.json_rules)
        twice = {"anyOf": [{"required": [name, "payload"], "properties": {"payload": {
            "required": [name]}}} for name in own]} if own and "payload" in props else None
        if twice and "not" in rules:
            rules["not"] = {"anyOf": [rules["not"], twice]}
        elif twice:
            rules["not"] = twice
        body.update(rules)
        return schema

    @model_validator(mode="before")
    @classmethod
    def _lift_declared_payload_fields(cls, data: Any) -> Any:
        # Clients (the worker runtime's HTTP transport among them) may nest an action's
        # fields in payload; lifting them validates them exactly like top-level ones.
        if not isinstance(data, dict) or not isinstance(data.get("payload"), dict):
            return data
        own = set(cls.model_fields) - set(REQUEST_FIELDS)
        payload = dict(data["payload"])
        nested = {k: payload.pop(k) for k in list(payload) if k in own}
        # Given at both places, one copy was dropped unsaid (a replay judged on the other).
        for name in sorted(set(nested) & set(data)):
            raise refusal(f"payload.{name}", f"{name} is given at the top level too: send it"
                          " once, at either place.")
        return {**data, **nested, "payload": payload}


class LeaseEnvelope(ActionEnvelope):
    """Actions on a leased attempt: the lease, its worker and the state the caller saw."""

    lease_euid: Id
    worker_euid: Id
    expected_state: StateName


class SubjectEnvelope(ActionEnvelope):
    """Operator actions on a subject: the subject and the state the caller saw."""

    subject_euid: Id
    expected_state: StateName



class ClaimIn(ActionEnvelope):
    worker_euid: Id


class RenewLeaseIn(ActionEnvelope):
    lease_euid: Id
    worker_euid: Id


class ReleaseLeaseIn(LeaseEnvelope):
    reason: str | None = text(NOTE_MAX)


class OutputExecution(StrictSchema):
    """The envelope fields a step may set on what it produces (outputs.OUTPUT_EXECUTION_FIELDS):
    READY (the default with a next queue) needs next_queue_key; PENDING waits unrouted."""

    model_config = ConfigDict(**StrictSchema.model_config, json_schema_extra={
        "if": {"required": ["state"], "properties": {"state": {"const": "READY"}}},
        "then": {"required": ["next_queue_key"],
                 "properties": {"next_queue_key": {"type": "string"}}}})

    state: Literal["READY", "PENDING"] | None = None
    next_queue_key: str | None = Field(None, min_length=1, max_length=KEY_MAX,
                                       json_schema_extra=LINE)
    next_action_key: str | None = Field(None, min_length=1, max_length=KEY_MAX,
                                        json_schema_extra=LINE)
    priority: Priority | None = None
    due_at: str | None = Field(None, max_length=64, pattern=INSTANT)
    ready_at: str | None = Field(None, max_length=64, pattern=INSTANT)


class OutputSpec(StrictSchema):
    template_code: str = Field(max_length=ID_MAX)
    name: str = required_text(NAME_MAX, line=True)
    properties: Properties = Field(default_factory=dict)
    execution: OutputExecution | None = Field(None, description=(
        "Execution envelope fields for a produced work-bearing object."))


_NON_EMPTY_TEXT = {"type": "string", "pattern": NON_BLANK}


class CompleteIn(LeaseEnvelope):
    # external and a next queue exclude each other (a null external or an empty
    # next_queue_key is none).
    json_rules = {"not": {"required": ["external", "next_queue_key"],
                          "properties": {"external": {"type": "object"},
                                         "next_queue_key": _NON_EMPTY_TEXT}}}

    next_queue_key: str | None = text(KEY_MAX, line=True)
    next_action_key: str | None = text(KEY_MAX, line=True)
    result_snapshot: ReadableData | None = None
    outputs: list[OutputSpec] | None = None
    external: ReadableData | None = Field(None, description=(
        "External dispatch metadata: the subject waits in WAITING_EXTERNAL for"
        " /actions/external-result. Not together with next_queue_key."))



# A failure that ends the item or holds it says why (RULES.md#retries, attempts.require_why).
SAID_WHY = {"required": ["error_message"], "properties": {"error_message": {
    "type": "string", "minLength": 1, "pattern": NON_BLANK}}}


def _retry_class_rules() -> dict[str, Any]:
    """retryable and error_class as JSON Schema: one of them, and they must agree
    (RULES.md#retries)."""
    transient = sorted(c.value for c in TRANSIENT_CLASSES)
    permanent = sorted(c.value for c in RetryClass if c not in TRANSIENT_CLASSES)

    def agreeing(retryable: bool, classes: list[str]) -> dict[str, Any]:
        return {"if": {"required": ["retryable"],
                       "properties": {"retryable": {"const": retryable}}},
                "then": {"properties": {"error_class": {"enum": [*classes, None]}}}}

    said = SAID_WHY
    return {
        "anyOf": [{"required": ["retryable"], "properties": {"retryable": {"type": "boolean"}}},
                  {"required": ["error_class"],
                   "properties": {"error_class": {"type": "string"}}}],
        "allOf": [agreeing(True, transient), agreeing(False, permanent),
                  {"if": {"required": ["error_class"],
                          "properties": {"error_class": {"enum": permanent}}}, "then": said},
                  {"if": {"required": ["retryable"], "properties": {"retryable": {"const": False}}},
                   "then": said}],
    }


class FailIn(LeaseEnvelope):
    json_rules = _retry_class_rules()

    retryable: bool | None = Field(None, description=(
        "Give retryable, error_class or both (then they must agree)."))
    error_class: RetryClassName | None = None
    error_code: str | None = text(KEY_MAX, line=True)
    error_message: str | None = text(ERROR_MESSAGE_MAX, (
        "What went wrong, for whoever takes the item up; required when the failure ends the"
        " item or holds it (retryable false, or a class that is not TRANSIENT_*)."))
    next_queue_key: str | None = text(KEY_MAX, line=True)


class HoldIn(SubjectEnvelope):
    hold_code: str | None = text(100, (
        "One of the lab's hold codes (setting BLOOMOPS_HOLD_CODES); OPERATOR_HOLD when"
        " omitted."))
    reason: str = required_text(REASON_MAX)


class ReleaseHoldIn(SubjectEnvelope):
    reason: str = required_text(REASON_MAX)


class RequeueIn(SubjectEnvelope):
    reason: str = required_text(REASON_MAX)
    reset_attempts: bool | None = None
    priority: Priority | None = Field(
        None, description="A priority class or a plain integer (higher first).")
    next_action_key: str | None = text(KEY_MAX, line=True)


class CancelIn(SubjectEnvelope):
    reason: str = required_text(REASON_MAX)


REASON_RULE = {"required": ["reason"],
                "properties": {"reason": {"type": "string", "minLength": 1,
                                          "pattern": NON_BLANK}}}


class ExpireLeaseIn(ActionEnvelope):
    # Forcing one lease needs a reason; the sweep (no lease_euid) records its own.
    json_rules = {"if": {"required": ["lease_euid"],
                         "properties": {"lease_euid": {"type": "string", "minLength": 1}}},
                  "then": REASON_RULE}

    reason: str | None = text(NOTE_MAX, "Required with lease_euid.")


class ExternalResultIn(SubjectEnvelope):
    json_rules = {
        "if": {"required": ["outcome"], "properties": {"outcome": {"const": "READY"}}},
        "then": {"required": ["next_queue_key"],
                 "properties": {"next_queue_key": _NON_EMPTY_TEXT}},
        "else": {"properties": {"next_queue_key": {"anyOf": [
            {"type": "null"}, {"type": "string", "pattern": r"^\s*$"}]}}},
        # a result that ends the item says why (RULES.md#retries)
        "allOf": [{"if": {"required": ["outcome"],
                          "properties": {"outcome": {"const": "FAILED_TERMINAL"}}},
                   "then": SAID_WHY}],
    }

    outcome: Literal[RecordExternalResult.OUTCOMES]  # type: ignore[valid-type]
    next_queue_key: str | None = Field(None, max_length=KEY_MAX, description=(
        "Required when outcome is READY, and only then."), json_schema_extra=STRIPPED_LINE)
    result_snapshot: ReadableData | None = None
    outputs: list[OutputSpec] | None = None
    error_message: str | None = text(ERROR_MESSAGE_MAX)


class RoutingFields(ActionEnvelope):
    """Where and how a subject enters its queue (RULES.md#intake)."""

    queue_key: Id
    next_action_key: str | None = text(KEY_MAX, "The queue's default_next_action_key when omitted.",
                                           line=True)
    priority: Priority | None = Field(None, description=(
        "A priority class or a plain integer (higher first); ROUTINE (0) when omitted."))
    ready_at: str | None = Field(None, max_length=64, pattern=INSTANT, description=(
        "ISO 8601 with its zone (Z or an offset); now when omitted."))
    due_at: str | None = Field(None, max_length=64, pattern=INSTANT,
                               description="ISO 8601 with its zone (Z or an offset).")


class RouteSubjectIn(RoutingFields):
    subject_euid: Id
    template_code: str | None = text(KEY_MAX, (
        "When given, the object's template must be this one (a manifest's check)."))


class RegisterSubjectIn(RoutingFields):
    template_code: str = required_text(KEY_MAX)
    name: str = required_text(NAME_MAX, line=True)
    properties: Properties | None = Field(None, description=(
        "Properties the template declares, of the declared types."))
class RecordEvidenceIn(ActionEnvelope):
    subject_euid: Id
    bundle_sha256: str = Field(pattern="^[0-9a-f]{64}$", min_length=64, max_length=64,
                               description="sha256 (lowercase hex) of the bundle's bytes.")


# The request schema of each core action, by the key of the engine's action registry (every
# action's, with the workers', the queue configuration's and the approvals':
# api/request_schemas.py).
CORE_SCHEMAS: dict[str, type[ActionEnvelope]] = {
    "claim_queue_item": ClaimIn, "renew_queue_lease": RenewLeaseIn,
    "release_queue_lease": ReleaseLeaseIn, "complete_queue_execution": CompleteIn,
    "fail_queue_execution": FailIn, "place_execution_hold": HoldIn,
    "release_execution_hold": ReleaseHoldIn, "requeue_subject": RequeueIn,
    "cancel_subject_execution": CancelIn, "expire_queue_lease": ExpireLeaseIn,
    "record_external_result": ExternalResultIn,
    "route_subject": RouteSubjectIn, "register_subject": RegisterSubjectIn,
    "record_evidence_bundle": RecordEvidenceIn,
}
