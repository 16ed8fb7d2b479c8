"""Operator actions on a subject: hold, release hold, requeue, cancel (RULES.md#holds)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from bloomops.execution import selectors
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import (
    REASON_MAX,
    common_checks,
    key_field,
    require,
    text_field,
)
from bloomops.execution.actions.steps import (
    end_active_leases,
    finish_record,
    new_record,
    next_queue_or_refuse,
    place_hold,
    queue_or_refuse,
    release_hold,
    resolve_dead_letters,
)
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import (
    HOLD,
    REL,
    Obj,
    children_of,
    is_kind,
    load,
)
from bloomops.execution.policy import is_terminal, waiting_dispatch
from bloomops.execution.states import (
    OUTSIDE_STATES,
    DeadLetterResolution,
    parse_priority,
)

# The code of a hold placed without one.
DEFAULT_HOLD_CODE = "OPERATOR_HOLD"


def hold_codes() -> list[str]:
    """The codes an operator may place a hold with (settings.BLOOMOPS_HOLD_CODES); holds
    placed earlier with other codes keep them (RULES.md#holds)."""
    return list(settings.BLOOMOPS_HOLD_CODES)


def _hold_code(payload: dict) -> str:
    code = text_field(payload, "hold_code", max_len=100)
    if code is None:
        return DEFAULT_HOLD_CODE
    allowed = hold_codes()
    # ASCII letters alone in any case: Unicode's upper() folds a dotless "ı" or a long "ſ"
    # into a code's "I" or "S", and a look-alike was stored as QC_FAIL
    wanted = code.upper() if code.isascii() else code
    if wanted not in allowed:
        raise ActionError("VALIDATION_ERROR", f"Unknown hold code {code!r}: choose one of"
                          f" {', '.join(allowed)}.", field="hold_code", allowed=allowed)
    return wanted


def _reason(req: ActionRequest) -> None:
    text_field(req.payload, "reason", required=True, max_len=REASON_MAX)


# The states a released subject returns to (RULES.md#holds): where it was when held. Not
# WAITING_EXTERNAL: the outside result refused while it was held is not sent again, so it
# becomes READY (claimable) as before.
RESTORED_STATES = ("PENDING", "READY", "FAILED_RETRYABLE")


def reconcile_outside_work(ctx: Context, done: str, after: str) -> None:
    """An operator's requeue, hold or cancel (``done``) of a subject whose work is under way
    outside (OUTSIDE_STATES) records that attempt's end as a record of its own, ending in
    ``after`` and filed under the queue that sent the work out, superseding the record that
    sent it (one that ended waiting outside): the outside run is given up on the record,
    never silently (RULES.md#reconciliation)."""
    env = ctx.env
    assert env is not None and ctx.subject is not None
    if env["state"] not in OUTSIDE_STATES:
        return
    dispatch = waiting_dispatch(env["state"], ctx.subject.props) or {}
    sent_by = dispatch.get("queue_key")
    queue = selectors.queue_config(str(sent_by or env.get("next_queue_key") or ""),
                                   tenant=ctx.tenant)
    previous = env.get("last_execution_record_euid")
    prev = load(euid=previous, tenant=ctx.tenant) if isinstance(previous, str) else None
    record = new_record(ctx, queue=queue, status="STARTED",
                        attempt=int(env.get("attempt_count") or 0) + 1, lease=None)
    run_id = dispatch.get("run_id")
    given_up = ("work running elsewhere" if env["state"] == "RUNNING" else "outside run"
                + (f" {run_id}" if isinstance(run_id, str | int) else ""))
    finish_record(ctx, record, "CANCELED", end_state=after, error_message=(
        f"{done} by {ctx.actor.username}: {ctx.payload['reason'].strip()}"
        f" ({given_up} given up)"))
    if (prev is not None and prev.subtype == "execution_record"
            and prev.props.get("end_state") in OUTSIDE_STATES):
        ctx.link(record, prev, "record_supersedes")


class PlaceExecutionHold(Handler):
    # an operator's action on the subject: no worker's lease to name; the hold is new
    uses = frozenset({"subject_euid", "queue_key", "expected_state", "expected_revision"})
    fields = ("hold_code", "reason")
    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "subject_euid", "expected_state")
        _hold_code(req.payload)
        _reason(req)

    def run(self, ctx: Context) -> None:
        env = ctx.env
        assert env is not None
        # A hold must be placeable whatever the routing; only an explicit queue must exist,
        # and be the subject's when it has one (the hold is listed under that queue).
        named, own = ctx.request.queue_key, env.get("next_queue_key")
        if named and own and named != own:
            raise ActionError("VALIDATION_ERROR", f"queue_key: {ctx.subject.euid} is in {own},"
                              f" not {named}.", field="queue_key")
        queue = queue_or_refuse(ctx, named, required=False) or (
            selectors.queue_config(own or "", tenant=ctx.tenant))
        # Released, it returns to where it was (RESTORED_STATES): a PENDING subject was in no
        # queue and goes back to none.
        before = env["state"]
        code = _hold_code(ctx.payload)
        if before == "HELD":
            before = self._on_top(ctx, code)
        reconcile_outside_work(ctx, "held", "HELD")
        end_active_leases(ctx, "CANCELED", "CANCELED", "HELD")
        reason = ctx.payload["reason"].strip()
        hold = place_hold(ctx, queue, code, reason, state_before=before)
        ctx.set_env(state="HELD", hold_state="ACTIVE", hold_reason=reason)
        ctx.result.update(hold_euid=hold.euid, queue_key=queue["queue_key"] if queue else None)

    @staticmethod
    def _on_top(ctx: Context, code: str) -> str:
        """A hold placed on a held subject (an escalation: QA's integrity code on top of an
        operator's hold, the first then released, with no moment unheld; RULES.md#holds):
        where the holds already there found the subject, so that whichever is released last
        returns it there. A code already holding it is refused: it says nothing new."""
        assert ctx.subject is not None
        active = children_of(ctx.subject.uid, REL["subject_hold"], where_status="ACTIVE",
                             lock=True)
        same = [h.euid for h in active if h.props.get("hold_code") == code]
        if same:
            raise ActionError("VALIDATION_ERROR", f"hold_code: {ctx.subject.euid} is already"
                              f" held with {code} ({same[0]}); give another code, or say more"
                              " on that hold's subject.", field="hold_code", hold_euid=same[0])
        return next((h.props["state_before_hold"] for h in active
                     if h.props.get("state_before_hold") in RESTORED_STATES), "READY")


class ReleaseExecutionHold(Handler):
    # an operator's action on the subject: no worker's lease to name
    uses = frozenset({"subject_euid", "hold_euid", "expected_state", "expected_revision"})
    fields = ("reason",)
    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "subject_euid", "expected_state")
        _reason(req)

    @staticmethod
    def _holds(ctx: Context) -> tuple[list[Obj], list[Obj]]:
        """The subject's active holds, and those released: the one named, else all."""
        assert ctx.subject is not None
        active = children_of(ctx.subject.uid, REL["subject_hold"], where_status="ACTIVE",
                             lock=True)
        named = ctx.request.hold_euid
        if not named:
            return active, active
        chosen = [h for h in active if h.euid == named]
        if not chosen:
            hold = load(euid=named, tenant=ctx.tenant)
            if not is_kind(hold, HOLD):
                raise ActionError("NOT_FOUND", "No such hold.", hold_euid=named)
            assert hold is not None
            if hold.props.get("status") == "ACTIVE":  # another subject's
                raise ActionError("NOT_FOUND", f"No such hold on {ctx.subject.euid}.",
                                  hold_euid=named)
            raise ActionError("HOLD_NOT_ACTIVE", hold_euid=named)
        return active, chosen

    def check(self, ctx: Context) -> None:
        # before the approval gate, and when an approval of the release is asked
        self._holds(ctx)

    def run(self, ctx: Context) -> None:
        assert ctx.subject is not None and ctx.env is not None
        active, chosen = self._holds(ctx)
        before = "READY"
        for hold in chosen:
            before = hold.props.get("state_before_hold") or before
            release_hold(ctx, hold, ctx.payload["reason"].strip())
        remaining = [h for h in active if h not in chosen]
        if not remaining:
            ctx.set_env(state=before if before in RESTORED_STATES else "READY",
                        hold_state="NONE", hold_reason=None)
        ctx.result.update(hold_euids=[h.euid for h in chosen],
                          hold_euid=chosen[0].euid if chosen else None,
                          active_holds_remaining=len(remaining))


def resets_attempts(payload: dict[str, Any], terminal: bool) -> bool:
    """Whether a requeue sets the attempt count back to 0: as the payload says, else (absent
    or null, as a JSON client writes out what it leaves unset) when the subject had finished
    for good (a new start after a dead letter)."""
    said = payload.get("reset_attempts")
    return terminal if said is None else bool(said)


class RequeueSubject(Handler):
    # An operator's action on the subject: no worker's lease to name, and no one hold it
    # acts on (release-hold releases a hold).
    uses = frozenset({"subject_euid", "queue_key", "expected_state", "expected_revision"})
    fields = ("reason", "reset_attempts", "priority", "next_action_key")
    repairs_envelope = True
    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "subject_euid", "expected_state")
        _reason(req)
        if req.payload.get("reset_attempts") not in (None, True, False):
            raise ActionError("VALIDATION_ERROR", "reset_attempts must be true or false.",
                              field="reset_attempts")
        key_field(req.payload, "next_action_key")
        if "priority" in req.payload:
            try:
                parse_priority(req.payload["priority"])
            except ValueError as exc:
                raise ActionError("VALIDATION_ERROR", str(exc), field="priority") from None

    def check(self, ctx: Context) -> None:
        """The queue named, else the one the subject is routed to, else its dead letter's;
        refused when there is none or it does not take the subject."""
        assert ctx.env is not None and ctx.subject is not None
        key = ctx.request.queue_key or ctx.env.get("next_queue_key")
        if not key:
            for dl in children_of(ctx.subject.uid, REL["subject_dead_letter"]):
                key = dl.props.get("queue_lookup_key") or key
        ctx.next_queue = next_queue_or_refuse(ctx, key)

    def run(self, ctx: Context) -> None:
        env = ctx.env
        assert env is not None and ctx.subject is not None
        queue = ctx.next_queue
        assert queue is not None  # found by check, before the approval gate
        was_terminal = is_terminal(env)
        reconcile_outside_work(ctx, "requeued", "READY")
        end_active_leases(ctx, "ABANDONED", "CANCELED", "REQUEUED")
        changes: dict[str, Any] = dict(
            state="READY", next_queue_key=queue["queue_key"], terminal=False,
            cancel_requested=False, retry_at=None, ready_at=ctx.now_ts, hold_state="NONE",
            hold_reason=None,
            next_action_key=key_field(ctx.payload, "next_action_key")
            or queue["config"].get("default_next_action_key") or env.get("next_action_key"))
        if resets_attempts(ctx.payload, was_terminal):
            changes["attempt_count"] = 0
        if ctx.payload.get("priority") is not None:  # null: the priority stays as it is
            changes["priority"] = parse_priority(ctx.payload["priority"])
        ctx.set_env(**changes)
        resolved = resolve_dead_letters(ctx, DeadLetterResolution.REQUEUED)
        ctx.result.update(queue_key=queue["queue_key"], dead_letters_resolved=resolved)


class CancelSubjectExecution(Handler):
    # an operator's action on the subject: no worker's lease to name; it ends every hold
    uses = frozenset({"subject_euid", "expected_state", "expected_revision"})
    fields = ("reason",)
    repairs_envelope = True
    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "subject_euid", "expected_state")
        _reason(req)

    def run(self, ctx: Context) -> None:
        assert ctx.subject is not None
        reconcile_outside_work(ctx, "canceled", "CANCELED")
        end_active_leases(ctx, "CANCELED", "CANCELED", "CANCELED")
        # A canceled subject keeps no active hold: the hold's evidence stays, ended by the
        # cancel and saying so (RULES.md#holds).
        ended = []
        for hold in children_of(ctx.subject.uid, REL["subject_hold"], where_status="ACTIVE",
                                lock=True):
            release_hold(ctx, hold, "Ended by cancel: " + ctx.payload["reason"].strip())
            ended.append(hold.euid)
        ctx.set_env(state="CANCELED", terminal=True, cancel_requested=True, retry_at=None,
                    hold_state="NONE", hold_reason=None)
        resolved = resolve_dead_letters(ctx, DeadLetterResolution.CANCELED)
        ctx.result.update(dead_letters_resolved=resolved, holds_ended=ended)
