"""Request schemas of the queue configuration actions (docs/API.md, "Queue configuration").
Their bounds are the engine's (``execution/actions/queue_fields.py``)."""

from typing import Annotated, Any, Literal

from pydantic import Field

from bloomops.api.action_schemas import (
    NON_BLANK,
    STRIPPED_LINE,
    ActionEnvelope,
    KeyList,
    StrictSchema,
    integer,
    required_text,
    text,
)
from bloomops.execution.actions.fields import KEY_MAX, LIST_MAX, REASON_MAX
from bloomops.execution.actions.queue_fields import (
    HELP,
    QUEUE_KEY_PATTERN,
    RANGES,
    RETRY_MODES,
    RETRY_RANGES,
)
from bloomops.execution.results import (
    CHOICE_MAX,
    MAX_CHOICES,
    MAX_RESULT_FIELDS,
    RESULT_KEY_PATTERN,
    RESULT_KINDS,
    RESULT_LABEL_MAX,
    RESULT_UNIT_MAX,
)
from bloomops.execution.states import ELIGIBLE_STATES

QueueKeyText = Annotated[str, Field(pattern=QUEUE_KEY_PATTERN, max_length=100)]
# A queue named by its key (one that exists is looked up, so only its length is checked here).
QueueKeyRef = Annotated[str, Field(min_length=1, max_length=100)]


def omittable(**kwargs: Any) -> Any:
    """A setting that may be left out (then it stays as it is) but not sent as null: the
    engine refuses a null where it keeps a value (a flag, a number, a policy)."""
    extra = kwargs.pop("json_schema_extra", None)

    def schema(s: dict[str, Any]) -> None:
        s.pop("default", None)  # null is no default: left out, the setting stays
        s.update(extra or {})
    return Field(None, json_schema_extra=schema, **kwargs)


def _number(name: str) -> Any:
    low, high = RETRY_RANGES[name]
    return omittable(ge=low, le=high)


class RetryPolicyIn(StrictSchema):
    mode: Literal[RETRY_MODES] = omittable()  # type: ignore[valid-type]
    initial_delay_seconds: float = _number("initial_delay_seconds")
    backoff_factor: float = _number("backoff_factor")
    max_delay_seconds: float = _number("max_delay_seconds")
    jitter_ratio: float = _number("jitter_ratio")


class ResultFieldIn(StrictSchema):
    """One thing a completion of the queue's step records (RULES.md#results)."""

    key: str = Field(pattern=RESULT_KEY_PATTERN, max_length=40)
    label: str = omittable(min_length=1, max_length=RESULT_LABEL_MAX, pattern=NON_BLANK,
                           description="What people read (default: the key).",
                           json_schema_extra=STRIPPED_LINE)
    kind: Literal[RESULT_KINDS] = omittable(  # type: ignore[valid-type]
        description="number (the default), text, pass_fail or choice.")
    unit: str = omittable(min_length=1, max_length=RESULT_UNIT_MAX, pattern=NON_BLANK,
                          description="A number's unit.", json_schema_extra=STRIPPED_LINE)
    min: float = omittable(description="A number's lowest value.")
    max: float = omittable(description="A number's highest value.")
    choices: list[Annotated[str, Field(min_length=1, max_length=CHOICE_MAX, pattern=NON_BLANK,
                                       json_schema_extra=STRIPPED_LINE)]] = omittable(
        min_length=2, max_length=MAX_CHOICES, description="A choice's values.")
    required: bool = omittable(description="A completion must record it (default false).")


def _ranged(name: str) -> Any:
    low, high = RANGES[name]
    return integer(low, high)


class QueueSettingsIn(ActionEnvelope):
    """The mutable fields of a queue (RULES.md#queue-configuration)."""

    reason: str = required_text(REASON_MAX, HELP["reason"])
    display_name: str = omittable(min_length=1, max_length=200, pattern=NON_BLANK,
                                  description=HELP["display_name"],
                                  json_schema_extra=STRIPPED_LINE)
    manual_only: bool = omittable(description=HELP["manual_only"])
    operator_visible: bool = omittable(description=HELP["operator_visible"])
    strict_order: bool = omittable(description=HELP["strict_order"])
    diagnostics_enabled: bool = omittable(description=HELP["diagnostics_enabled"])
    dispatch_priority: _ranged("dispatch_priority") = omittable(  # type: ignore[valid-type]
        description=HELP["dispatch_priority"])
    lease_ttl_seconds: _ranged("lease_ttl_seconds") = omittable(  # type: ignore[valid-type]
        description=HELP["lease_ttl_seconds"])
    max_attempts_default: _ranged("max_attempts_default") = omittable(  # type: ignore[valid-type]
        description=HELP["max_attempts_default"])
    straggler_threshold_seconds: _ranged(  # type: ignore[valid-type]
        "straggler_threshold_seconds") = omittable(
        description=HELP["straggler_threshold_seconds"])
    outside_overdue_seconds: _ranged(  # type: ignore[valid-type]
        "outside_overdue_seconds") = omittable(description=HELP["outside_overdue_seconds"])
    eligible_states: list[Literal[ELIGIBLE_STATES]] = omittable(  # type: ignore[valid-type]
        min_length=1, description=HELP["eligible_states"])
    required_worker_capabilities: KeyList | None = None
    site_scope: KeyList | None = None
    platform_scope: KeyList | None = None
    assay_scope: KeyList | None = None
    output_template_codes: KeyList | None = Field(
        None, description=HELP["output_template_codes"])
    retry_policy: RetryPolicyIn = omittable(description=HELP["retry_policy"])
    default_next_queue_key: QueueKeyText | None = Field(
        None, description=HELP["default_next_queue_key"])
    default_next_action_key: str | None = text(KEY_MAX, HELP["default_next_action_key"],
                                               line=True)
    next_queue_keys: list[QueueKeyText] | None = Field(None, max_length=LIST_MAX,
                                                       description=HELP["next_queue_keys"])
    result_fields: list[ResultFieldIn] | None = Field(None, max_length=MAX_RESULT_FIELDS,
                                                      description=HELP["result_fields"])


class CreateQueueIn(QueueSettingsIn):
    queue_key: str = Field(pattern=QUEUE_KEY_PATTERN, max_length=100,  # type: ignore[assignment]
                           description=HELP["queue_key"])
    subject_template_codes: KeyList = Field(
        min_length=1, description=HELP["subject_template_codes"])


class UpdateQueueIn(QueueSettingsIn):
    queue_key: QueueKeyRef  # type: ignore[assignment]
    expected_revision: integer(0, 2**31)  # type: ignore[valid-type]
    subject_template_codes: KeyList | None = Field(None, description=(
        "Fixed: a different value is refused REPLACEMENT_REQUIRED (use replace-queue)."))
    new_queue_key: str | None = Field(None, max_length=100, description=(
        "Fixed: a different key is refused REPLACEMENT_REQUIRED (use replace-queue)."))


class SetQueueEnabledIn(ActionEnvelope):
    queue_key: QueueKeyRef  # type: ignore[assignment]
    expected_revision: integer(0, 2**31)  # type: ignore[valid-type]
    enabled: bool
    reason: str = required_text(REASON_MAX, "Why; shown on the dashboard while disabled.")


class ReplaceQueueIn(QueueSettingsIn):
    queue_key: QueueKeyRef  # type: ignore[assignment]
    expected_revision: integer(0, 2**31)  # type: ignore[valid-type]
    subject_template_codes: KeyList = Field(
        min_length=1, description="The successor's templates.")
    new_queue_key: str | None = Field(None, pattern=QUEUE_KEY_PATTERN, max_length=100,
                                      description="The successor's key (default: the same).")


QUEUE_SCHEMAS: dict[str, type[ActionEnvelope]] = {
    "create_queue": CreateQueueIn, "update_queue": UpdateQueueIn,
    "set_queue_enabled": SetQueueEnabledIn, "replace_queue": ReplaceQueueIn,
}
