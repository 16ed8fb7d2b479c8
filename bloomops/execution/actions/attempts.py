"""Actions on a leased attempt: renew, release, complete, fail; and the result of external
work (RULES.md#leases, RULES.md#retries)."""

from __future__ import annotations

from datetime import timedelta

from bloomops.execution import selectors
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import (
    ERROR_MESSAGE_MAX,
    KEY_MAX,
    NOTE_MAX,
    common_checks,
    key_field,
    obj_field,
    require,
    text_field,
)
from bloomops.execution.actions.outputs import create_outputs, validate_outputs
from bloomops.execution.actions.steps import (
    close_lease,
    create_dead_letter,
    end_active_leases,
    finish_record,
    lock_subject_of_request,
    lock_worker,
    new_record,
    next_queue_or_refuse,
    place_hold,
    queue_or_refuse,
    record_of_lease,
    refuse_stopped_worker,
    refuse_unless_flow_allows,
)
from bloomops.execution.binding import FAILURE_HOLD_CODE
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.envelope import ts
from bloomops.execution.errors import ActionError
from bloomops.execution.guards import ensure_controls_worker, lock_subject
from bloomops.execution.objects import (
    LEASE,
    REL,
    Obj,
    is_kind,
    load,
    parent_of,
    save_props,
)
from bloomops.execution.policy import (
    DISPATCH_OWN,
    attempt_limit,
    classify_failure,
    failure_classes_for,
    retry_at,
)
from bloomops.execution.results import check_step_result
from bloomops.execution.states import (
    DEFAULT_LEASE_TTL_SECONDS,
    TRANSIENT_CLASSES,
    RetryClass,
)


def settle_failure(ctx: Context, cfg: dict, *, retryable: bool,
                   route: dict | None = None) -> str:
    """RULES.md#retries, for a worker's failure and an external one alike: a retryable
    failure under the attempt limit waits for the queue's backoff (then goes where ``route``
    says, when given); any other failure is terminal. Sets the envelope and returns the
    record's status."""
    env = ctx.env
    assert env is not None
    attempts = int(env.get("attempt_count") or 0) + 1
    if retryable and attempts < attempt_limit(env, cfg):
        when = ts(retry_at(cfg.get("retry_policy") or {}, attempts, ctx.now))
        ctx.set_env(state="FAILED_RETRYABLE", attempt_count=attempts, retry_at=when,
                    **(route or {}))
        ctx.result["retry_at"] = when
        return "FAILED_RETRYABLE"
    ctx.set_env(state="FAILED_TERMINAL", terminal=True, attempt_count=attempts, retry_at=None)
    return "FAILED_TERMINAL"


class RenewQueueLease(Handler):
    uses = frozenset({"subject_euid", "worker_euid", "lease_euid"})
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "lease_euid", "worker_euid")

    def prepare(self, ctx: Context) -> None:
        # The leased subject's row is locked first, as every lease action does (then the
        # lease): a claim of it (which locks it) is then either done, and this renewal is
        # judged after it, or waits, so no lease is renewed past a claim that replaced it.
        lease = load(euid=ctx.request.lease_euid, tenant=ctx.tenant)
        if is_kind(lease, LEASE):
            assert lease is not None
            ctx.leased_subject = parent_of(lease.uid, REL["subject_lease"], tenant=ctx.tenant,
                                           lock=True)

    def run(self, ctx: Context) -> None:
        lease, worker = ctx.lease, ctx.worker
        assert lease is not None and worker is not None
        refuse_stopped_worker(worker, "renew leases")
        props = dict(lease.props)
        ttl = int(props.get("ttl_seconds") or DEFAULT_LEASE_TTL_SECONDS)
        props.update(heartbeat_at=ctx.now_ts, expires_at=ts(ctx.now + timedelta(seconds=ttl)))
        save_props(lease, props)
        ctx.target = lease
        if ctx.leased_subject is not None:  # in the subject's history and its bundles too
            ctx.related_uids.append(ctx.leased_subject.uid)
        ctx.result.update(lease_euid=lease.euid, worker_euid=worker.euid,
                          expires_at=props["expires_at"],
                          # by lineage, never the lease's copy (RULES.md#leases)
                          subject_euid=ctx.leased_subject.euid if ctx.leased_subject else None,
                          queue_key=props.get("queue_lookup_key"))


class LeaseAction(Handler):
    """Actions that end the attempt of a leased subject."""

    # Not ``queue_key``: a completion's next queue is ``next_queue_key`` (a slip for it
    # would route to the default without a word).
    uses = frozenset({
        "subject_euid", "worker_euid", "lease_euid", "expected_state", "expected_revision"})

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "lease_euid", "worker_euid", "expected_state")

    def prepare(self, ctx: Context) -> None:
        lock_subject_of_request(ctx)

    def queue_of_lease(self, ctx: Context) -> dict | None:
        assert ctx.lease is not None
        return selectors.queue_config(ctx.lease.props.get("queue_lookup_key") or "",
                                      tenant=ctx.tenant)


class ReleaseQueueLease(LeaseAction):
    fields = ("reason",)
    def run(self, ctx: Context) -> None:
        assert ctx.lease is not None
        reason = text_field(ctx.payload, "reason", max_len=NOTE_MAX) or "RELEASED_BY_WORKER"
        close_lease(ctx, ctx.lease, "RELEASED", reason)
        finish_record(ctx, record_of_lease(ctx.lease), "CANCELED", error_message=reason)
        ctx.result.update(lease_euid=ctx.lease.euid, worker_euid=ctx.worker.euid if ctx.worker
                          else None, queue_key=ctx.lease.props.get("queue_lookup_key"))


class CompleteQueueExecution(LeaseAction):
    fields = ("next_queue_key", "next_action_key", "result_snapshot", "outputs", "external")
    def validate(self, req: ActionRequest) -> None:
        super().validate(req)
        p = req.payload
        key_field(p, "next_queue_key")
        key_field(p, "next_action_key")
        obj_field(p, "result_snapshot")
        obj_field(p, "external")
        if p.get("external") is not None and p.get("next_queue_key"):
            raise ActionError("VALIDATION_ERROR", "A completion either waits for an external"
                              " result or routes to a next queue, not both.", field="external")
        if p.get("next_action_key") and (not p.get("next_queue_key")
                                         or p.get("external") is not None):
            # it would be dropped unread: the subject finishes, or waits for its result
            raise ActionError("VALIDATION_ERROR", "next_action_key applies only with a"
                              " next_queue_key: the step it names is that queue's.",
                              field="next_action_key")
        validate_outputs(p)

    def run(self, ctx: Context) -> None:
        lease, env = ctx.lease, ctx.env
        assert lease is not None and env is not None
        if ctx.worker is not None:  # its result is not taken; release and fail give it back
            refuse_stopped_worker(ctx.worker, "complete work")
        p = ctx.payload
        next_queue = next_queue_or_refuse(ctx, p.get("next_queue_key"), required=False)
        queue = self.queue_of_lease(ctx)
        refuse_unless_flow_allows(queue, next_queue)
        check_step_result(queue, p.get("result_snapshot"), finishing=p.get("external") is None)
        record = record_of_lease(lease)
        close_lease(ctx, lease, "COMPLETED", "COMPLETED")
        external = p.get("external")
        if external is not None:
            ctx.set_env(state="WAITING_EXTERNAL", retry_at=None)
            props = dict(ctx.subject.props) if ctx.subject else {}
            # The dispatching queue answers for the callback (its declared outputs).
            props["external_dispatch"] = {**external, **dict(zip(DISPATCH_OWN, (
                ctx.now_ts, lease.euid, lease.props.get("queue_lookup_key")), strict=True))}
            ctx.subject.props = props  # type: ignore[union-attr]
        elif next_queue is not None:
            ctx.set_env(state="READY", next_queue_key=next_queue["queue_key"],
                        next_action_key=key_field(p, "next_action_key")
                        or next_queue["config"].get("default_next_action_key"),
                        ready_at=ctx.now_ts, retry_at=None, attempt_count=0, terminal=False)
        else:
            ctx.set_env(state="COMPLETED", terminal=True, next_queue_key=None,
                        next_action_key=None, retry_at=None)
        ctx.set_env(queue_cache={"current_queue_key": env.get("next_queue_key"),
                                 "computed_at": ctx.now_ts})
        snapshot = dict(p.get("result_snapshot") or {})
        if external is not None:
            snapshot["external_dispatch"] = external
        finish_record(ctx, record, "SUCCEEDED", result_snapshot=snapshot,
                       end_revision=int(env["revision"]) + 1)
        outputs = create_outputs(ctx, record, p.get("outputs") or [], queue)
        ctx.result.update(lease_euid=lease.euid, execution_record_euid=record.euid if record
                          else None, worker_euid=ctx.worker.euid if ctx.worker else None,
                          queue_key=lease.props.get("queue_lookup_key"),
                          next_queue_key=env.get("next_queue_key"), output_euids=outputs)


def require_why(cls: RetryClass, message: str | None) -> None:
    """RULES.md#retries: a failure whose class ends the item or holds it says why; the dead
    letter, hold or cancel it leaves is read by a person who must act on it."""
    if message is None and cls not in TRANSIENT_CLASSES:
        raise ActionError("VALIDATION_ERROR", f"error_message is required: a failure of class {cls}"
                          " ends the item or holds it, and whoever takes it up needs to know"
                          " why.", field="error_message")


class FailQueueExecution(LeaseAction):
    fields = ("retryable", "error_class", "error_code", "error_message", "next_queue_key")
    def validate(self, req: ActionRequest) -> None:
        super().validate(req)
        p = req.payload
        retryable = p.get("retryable")
        if retryable is not None and not isinstance(retryable, bool):
            raise ActionError("VALIDATION_ERROR", "retryable must be true or false.",
                              field="retryable")
        error_class = p.get("error_class")
        if error_class is not None and error_class not in {c.value for c in RetryClass}:
            raise ActionError("VALIDATION_ERROR", "error_class must be one of "
                              + ", ".join(c.value for c in RetryClass) + ".", field="error_class")
        if retryable is None and error_class is None:
            raise ActionError("VALIDATION_ERROR", "Give retryable or error_class.",
                              field="error_class")
        try:
            cls = classify_failure(retryable, error_class)
        except ValueError as exc:
            raise ActionError("VALIDATION_ERROR", str(exc), field="error_class") from None
        text_field(p, "error_code", max_len=KEY_MAX, line=True)  # a code, filtered on
        require_why(cls, text_field(p, "error_message", max_len=ERROR_MESSAGE_MAX))
        key_field(p, "next_queue_key")

    def run(self, ctx: Context) -> None:
        lease, env = ctx.lease, ctx.env
        assert lease is not None and env is not None and ctx.subject is not None
        p = ctx.payload
        cls = classify_failure(p.get("retryable"), p.get("error_class"))
        if cls not in failure_classes_for(ctx.actor.roles):
            raise ActionError("FORBIDDEN", "Only an operator cancels an item; record what went"
                              " wrong with another class, or ask an operator to cancel it.",
                              field="error_class")
        # Where a retry would go is checked whatever the failure turns out to be: a request
        # naming a queue that cannot take the subject is wrong even when no retry follows.
        queue = self.queue_of_lease(ctx)
        if p.get("next_queue_key"):
            # where it waits for its retry must offer it then; a failure that ends the item
            # (or holds it) sends it nowhere
            retries = cls in TRANSIENT_CLASSES and int(env.get("attempt_count") or 0) + 1 < (
                attempt_limit(env, queue["config"] if queue else {}))
            retry_queue = next_queue_or_refuse(
                ctx, p["next_queue_key"], arriving="FAILED_RETRYABLE" if retries else None)
            if retry_queue is not None and queue is not None and (
                    retry_queue["queue_key"] != queue["queue_key"]):
                # a retry elsewhere leaves the queue as a completion would: by its flow
                refuse_unless_flow_allows(queue, retry_queue)
        cfg = queue["config"] if queue else {}
        record = record_of_lease(lease)
        message = p.get("error_message")
        attempts = int(env.get("attempt_count") or 0) + 1
        max_attempts = attempt_limit(env, cfg)
        close_lease(ctx, lease, "RELEASED", cls.value)
        fields = {"retryable": cls in TRANSIENT_CLASSES,
                  "error_class": cls.value, "error_code": p.get("error_code"),
                  "error_message": message}
        if cls == RetryClass.OPERATOR_CANCELED:
            ctx.set_env(state="CANCELED", terminal=True, cancel_requested=True,
                        attempt_count=attempts)
            finish_record(ctx, record, "CANCELED", **fields)
        elif cls == RetryClass.BUSINESS_RULE_HOLD:
            ctx.set_env(state="HELD", hold_state="ACTIVE", hold_reason=message or cls.value,
                        attempt_count=attempts)
            finish_record(ctx, record, "FAILED_RETRYABLE", **fields)
            hold = place_hold(ctx, queue, FAILURE_HOLD_CODE, message or "Business rule hold",
                               state_before="READY")
            ctx.result["hold_euid"] = hold.euid
        else:
            retry_queue_key = p.get("next_queue_key") or (queue["queue_key"] if queue else None)
            status = settle_failure(ctx, cfg, retryable=fields["retryable"],
                                    route={"next_queue_key": retry_queue_key})
            finish_record(ctx, record, status, **fields)
            if status == "FAILED_TERMINAL":
                create_dead_letter(ctx, queue, record, lease, cls.value, message)
        ctx.result.update(lease_euid=lease.euid, execution_record_euid=record.euid if record
                          else None, worker_euid=ctx.worker.euid if ctx.worker else None,
                          queue_key=lease.props.get("queue_lookup_key"), attempt_count=attempts,
                          max_attempts=max_attempts, error_class=cls.value)



class RecordExternalResult(Handler):
    uses = frozenset({
        "subject_euid", "worker_euid", "queue_key", "expected_state", "expected_revision"})
    fields = ("outcome", "next_queue_key", "result_snapshot", "outputs", "error_message")
    OUTCOMES = ("READY", "COMPLETED", "FAILED_RETRYABLE", "FAILED_TERMINAL")

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "subject_euid", "expected_state")
        outcome = req.payload.get("outcome")
        if outcome not in self.OUTCOMES:
            raise ActionError("VALIDATION_ERROR", "outcome must be one of "
                              + ", ".join(self.OUTCOMES) + ".", field="outcome")
        key_field(req.payload, "next_queue_key")
        if outcome == "READY" and not req.payload.get("next_queue_key"):
            raise ActionError("VALIDATION_ERROR", "next_queue_key is required for READY.",
                              field="next_queue_key")
        if outcome != "READY" and req.payload.get("next_queue_key"):
            # only a READY result moves the subject on; elsewhere it would go unchecked
            raise ActionError("VALIDATION_ERROR", "next_queue_key applies only to outcome"
                              " READY.", field="next_queue_key")
        obj_field(req.payload, "result_snapshot")
        message = text_field(req.payload, "error_message", max_len=ERROR_MESSAGE_MAX)
        if outcome == "FAILED_TERMINAL":  # dead-lettered as PERMANENT_STATE (run)
            require_why(RetryClass.PERMANENT_STATE, message)
        validate_outputs(req.payload)

    def prepare(self, ctx: Context) -> None:
        lock_subject(ctx, ctx.request.subject_euid)
        dispatcher = self._dispatcher(ctx)
        if ctx.request.worker_euid:
            worker = lock_worker(ctx, ctx.request.worker_euid)
            refuse_stopped_worker(worker, "report external results")
            if dispatcher is not None and worker.uid != dispatcher.uid \
                    and not ctx.actor.is_admin:
                raise ActionError("LEASE_NOT_OWNED", f"{dispatcher.euid} dispatched this"
                                  " work: its result is that worker's to report.",
                                  worker_euid=worker.euid, dispatched_by=dispatcher.euid)
        elif dispatcher is not None and not ctx.actor.is_admin:
            # the result is the dispatching worker's, sent for it or not: only its account
            # reports it, and not once an admin has disabled or retired it (an admin can)
            ensure_controls_worker(ctx.actor, dispatcher)
            refuse_stopped_worker(dispatcher, "report external results")

    @staticmethod
    def _dispatcher(ctx: Context) -> Obj | None:
        """The worker whose completion dispatched the subject's external work: through the
        lease the dispatch names, by lineage (RULES.md#requests)."""
        assert ctx.subject is not None
        dispatch = ctx.subject.props.get("external_dispatch")
        lease_euid = dispatch.get("lease_euid") if isinstance(dispatch, dict) else None
        lease = load(euid=lease_euid, tenant=ctx.tenant) if isinstance(lease_euid, str) \
            else None
        if not is_kind(lease, LEASE):
            return None
        assert lease is not None
        return parent_of(lease.uid, REL["worker_lease"], tenant=ctx.tenant)

    def run(self, ctx: Context) -> None:
        env = ctx.env
        assert env is not None and ctx.subject is not None
        p = ctx.payload
        outcome = p["outcome"]
        dispatch = ctx.subject.props.get("external_dispatch") or {}
        named, dispatched = ctx.request.queue_key, dispatch.get("queue_key")
        if named and dispatched and named != dispatched:
            # queue_key names the queue the work came from, where the subject does not say
            raise ActionError("VALIDATION_ERROR", f"The external work was dispatched from"
                              f" queue {dispatched!r}, not {named!r}.", field="queue_key",
                              dispatched_from=dispatched)
        queue = queue_or_refuse(ctx, dispatched or named, required=False)
        if outcome in ("READY", "COMPLETED"):  # the step's result, as its queue declares it
            check_step_result(queue, p.get("result_snapshot"))
        # The result ends the attempt whoever holds the subject now (a lease taken on a queue
        # offering it while it waited): the subject moves on, so no lease may outlive it.
        end_active_leases(ctx, "ABANDONED", "CANCELED", "EXTERNAL_RESULT")
        record = new_record(ctx, queue=queue, status="STARTED",
                             attempt=int(env.get("attempt_count") or 0) + 1, lease=None)
        if outcome == "READY":
            next_queue = next_queue_or_refuse(ctx, p["next_queue_key"])
            refuse_unless_flow_allows(queue, next_queue)
            assert next_queue is not None
            ctx.set_env(state="READY", next_queue_key=next_queue["queue_key"], ready_at=ctx.now_ts,
                        next_action_key=next_queue["config"].get("default_next_action_key"),
                        retry_at=None, attempt_count=0)
            status = "SUCCEEDED"
        elif outcome == "COMPLETED":
            ctx.set_env(state="COMPLETED", terminal=True, next_queue_key=None)
            status = "SUCCEEDED"
        else:
            # a retryable failure meets the attempt limit as a worker's does
            status = settle_failure(ctx, queue["config"] if queue else {},
                                    retryable=outcome == "FAILED_RETRYABLE")
        finish_record(ctx, record, status, result_snapshot=p.get("result_snapshot") or {},
                       error_message=p.get("error_message"),
                       end_revision=int(env["revision"]) + 1)
        if status == "FAILED_TERMINAL":
            create_dead_letter(ctx, queue, record, None, "PERMANENT_STATE" if outcome ==
                               "FAILED_TERMINAL" else "TRANSIENT_DEPENDENCY",
                               p.get("error_message"))
        outputs = create_outputs(ctx, record, p.get("outputs") or [], queue)
        ctx.result.update(execution_record_euid=record.euid, output_euids=outputs,
                          queue_key=queue["queue_key"] if queue else None)
