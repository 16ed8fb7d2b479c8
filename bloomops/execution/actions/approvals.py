"""Two-person approvals (RULES.md#approvals): request one, decide it (an electronic
signature; approving runs the gated action in the same transaction), withdraw it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from bloomops.accounts.models import COMMAND_LINE
from bloomops.accounts.signatures import (
    display_name,
    password_given_by,
    set_up_together,
    signature_problem,
)
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import (
    KEY_MAX,
    REASON_MAX,
    common_checks,
    obj_field,
    require,
    text_field,
)
from bloomops.execution.actions.subjects import resets_attempts
from bloomops.execution.approvals import (
    APPROVAL_CODE,
    GATED_ACTIONS,
    effective_status,
    expires_at,
    required_rule,
    subject_flags,
)
from bloomops.execution.binding import request_disagreements
from bloomops.execution.chain import sealed_on
from bloomops.execution.context import ActionRequest, Context, action_spec, ensure_role
from bloomops.execution.envelope import ts
from bloomops.execution.errors import PLAIN, ActionError
from bloomops.execution.guards import (
    check_not_applicable,
    check_payload,
    check_request_fields,
    lock_subject,
)
from bloomops.execution.objects import REL, Obj, children_of, is_kind, load, save_props
from bloomops.execution.policy import is_terminal
from bloomops.execution.states import DECISIONS
from bloomops.tapdb.instances import link
from bloomops.tapdb.tenancy import tenant_of

APPROVAL = "execution/approval"
SIGNATURE_METHOD = "password re-entry"


def gated_request(req: ActionRequest, action_key: str, parameters: dict[str, Any]
                  ) -> ActionRequest:
    """The gated action's request as the requester states it (the approval's subject, hold,
    queue; its payload), to check now. Its expected state is set when it runs; a state it
    accepts stands in, since a handler's validate only checks that one is named."""
    return ActionRequest(action_key=action_key, actor=req.actor, idempotency_key="approval",
                         subject_euid=req.subject_euid, hold_euid=req.hold_euid,
                         queue_key=req.queue_key, expected_state="HELD",
                         payload=dict(parameters))


def gated_parameters(req: ActionRequest) -> dict[str, Any]:
    """The gated action's payload: the parameters stated, its reason the request's own
    unless the parameters give another (every gated action needs one, RULES.md#holds)."""
    params = dict(req.payload.get("parameters") or {})
    params.setdefault("reason", (req.payload.get("reason") or "").strip())
    return params


class RequestApproval(Handler):
    uses = frozenset({
        "subject_euid", "hold_euid", "queue_key", "expected_state", "expected_revision"})
    fields = ("action_key", "parameters", "reason")
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        from bloomops.execution.actions import HANDLERS

        common_checks(req)
        require(req, "subject_euid")
        text_field(req.payload, "reason", required=True, max_len=REASON_MAX)
        key = text_field(req.payload, "action_key", required=True, max_len=KEY_MAX)
        if key not in GATED_ACTIONS:
            raise ActionError("VALIDATION_ERROR", "action_key must be one of "
                              + ", ".join(sorted(GATED_ACTIONS)) + ".", field="action_key")
        # The parameters must be a valid request of the gated action, checked now, so an
        # approver never signs something that could not run.
        obj_field(req.payload, "parameters")
        gated = gated_request(req, key, gated_parameters(req))
        check_request_fields(gated)
        try:
            check_payload(gated.payload, HANDLERS[key].fields)
            HANDLERS[key].validate(gated)
        except ActionError as err:
            # the gated action's field is one of this request's parameters: named so
            field = err.details.get("field")
            stated = req.payload.get("parameters") or {}  # not the reason filled in
            if field in stated or field == "payload":
                named = "parameters" if field == "payload" else f"parameters.{field}"
                raise ActionError(err.code, err.message,
                                  **{**err.details, "field": named}) from None
            raise
        # A hold or queue the gated action does not use would be signed for and then
        # refused when the approval runs it.
        check_not_applicable(gated, HANDLERS[key].not_applicable)

    def run(self, ctx: Context) -> None:
        from bloomops.execution.actions import HANDLERS

        assert ctx.subject is not None and ctx.env is not None
        req = ctx.request
        key = req.payload["action_key"].strip()
        ensure_role(ctx.actor.roles, action_spec(key))
        # What the gated action itself would refuse on this subject now, refused now.
        HANDLERS[key].check(replace(ctx, request=gated_request(req, key, gated_parameters(req)),
                                    spec=action_spec(key), result={}, related_uids=[]))
        flags = subject_flags(ctx.subject.uid)
        rule = required_rule(key, ctx.subject, req.hold_euid, flags)
        if rule is None:
            raise ActionError("APPROVAL_NOT_NEEDED", action_key=key,
                              subject_euid=ctx.subject.euid, hold_euid=req.hold_euid)
        for pending in children_of(ctx.subject.uid, REL["subject_approval"],
                                   where_status="REQUESTED"):
            if (pending.props.get("action_key") == key
                    and effective_status(pending.props, ctx.now) == "REQUESTED"):
                raise ActionError("APPROVAL_PENDING", approval_euid=pending.euid)
        holds = [req.hold_euid] if req.hold_euid else list(flags.active_holds)
        parameters = gated_parameters(req)
        if key == "requeue_subject" and parameters.get("reset_attempts") is None:
            # The default made explicit now: what is signed for, shown and then run stays
            # the same whatever becomes of the subject (a requeued subject is no longer
            # terminal, and its approval would then read "attempts kept").
            parameters = {**parameters,
                          "reset_attempts": resets_attempts(parameters, is_terminal(ctx.env))}
        approval = ctx.create(APPROVAL_CODE, name=f"Approval {key} {ctx.subject.euid}",
                              properties={
            "status": "REQUESTED", "action_key": key,
            "parameters": parameters,
            "queue_key": req.queue_key, "rule": rule,
            "reason": req.payload["reason"].strip(),
            "subject_lookup_euid": ctx.subject.euid, "hold_lookup_euid": req.hold_euid,
            "hold_euids": holds,
            "hold_codes": [flags.active_holds.get(h, "") for h in holds],
            "requested_by": ctx.actor.username,
            "requested_at": ctx.now_ts, "expires_at": expires_at(ctx.now),
            "subject_state_at_request": ctx.env["state"],
            "subject_revision_at_request": int(ctx.env.get("revision") or 0),
            "decision": None, "decided_by": None, "decided_at": None,
            "decision_reason": None, "signature": None,
        })
        ctx.link(ctx.subject, approval, "subject_approval")
        for euid in holds:
            if euid in flags.hold_uids:
                link(flags.hold_uids[euid], approval.uid, REL["hold_approval"],
                     tenant_id=ctx.tenant)
        _on_approval(ctx, approval)
        # sealed in the request's record: what a decision checks the approval against
        ctx.result.update(approval_euid=approval.euid, approval_status="REQUESTED", rule=rule,
                          expires_at=approval.props["expires_at"], gated_action_key=key,
                          terms={name: approval.props[name] for name in SEALED_TERMS})


def named_approval(euid: str, tenant: str | None) -> Obj:
    """The approval ``euid`` names, unlocked; NOT_FOUND for anything else."""
    found = load(euid=euid, tenant=tenant)
    if not is_kind(found, APPROVAL):
        raise ActionError("NOT_FOUND", "No such approval.", approval_euid=euid)
    assert found is not None
    return found


# What a request seals of the approval it makes (beside who asked, when and why, which every
# record seals): what the second person signs for.
SEALED_TERMS = ("action_key", "parameters", "queue_key", "rule", "hold_lookup_euid",
                "hold_euids", "hold_codes", "subject_revision_at_request", "expires_at")


def sealed_requester(approval: Obj, tenant: str | None) -> str:
    """Who asked, as the request's sealed record says, once the approval is found to say
    what that record sealed (APPROVAL_TAMPERED otherwise, naming the field). The approval is
    a snapshot the database's writers can rewrite: a requester renamed there decided their
    own request."""
    records = sealed_on(tenant, approval.euid, "request_approval")
    if not records or not records[0]["intact"]:
        _tampered(approval, "its request's sealed record is missing" if not records else
                  f"its request's record {records[0]['euid']} no longer matches its seal")
    record = records[0]["json_addl"]
    if differing := request_disagreements(approval.props, record):
        name, mine, sealed = differing[0]
        _tampered(approval, f"its {name} reads {mine!r}, its sealed request record"
                            f" {records[0]['euid']} says {sealed!r}")
    return record["executed_by"]


def _tampered(approval: Obj, problem: str) -> None:
    raise ActionError("APPROVAL_TAMPERED", f"{PLAIN['APPROVAL_TAMPERED']} ({problem})",
                      approval_euid=approval.euid)


def refuse_own_request(approval: Obj, username: str, tenant: str | None) -> str:
    """Who asked (``sealed_requester``), unless it is ``username``."""
    requester = sealed_requester(approval, tenant)
    if username in (requester, approval.props.get("requested_by")):
        raise ActionError("SELF_APPROVAL", approval_euid=approval.euid)
    return requester


class _OnApproval(Handler):
    """Decide and cancel: the approval names its subject, locked first (subject -> approval,
    the executor's lock order), so two deciders of one approval queue behind each other."""

    uses = frozenset({"subject_euid", "expected_state", "expected_revision"})

    guards_subject = False

    def prepare(self, ctx: Context) -> None:
        euid = ctx.payload["approval_euid"].strip()
        found = named_approval(euid, ctx.tenant)
        subject_euid = found.props.get("subject_lookup_euid")
        if ctx.request.subject_euid and ctx.request.subject_euid != subject_euid:
            raise ActionError("VALIDATION_ERROR", "That approval is of another subject.",
                              field="subject_euid", approval_euid=euid)
        lock_subject(ctx, subject_euid)
        approval = load(euid=euid, tenant=ctx.tenant, lock=True)
        assert approval is not None
        ctx.result["approval_euid"] = approval.euid
        self.pending(ctx, approval)
        ctx.target = approval

    @staticmethod
    def pending(ctx: Context, approval: Obj) -> None:
        status = effective_status(approval.props, ctx.now)
        if status == "EXPIRED":
            raise ActionError("APPROVAL_EXPIRED", approval_euid=approval.euid,
                              expires_at=approval.props.get("expires_at"))
        if status != "REQUESTED":
            raise ActionError("APPROVAL_NOT_PENDING", approval_euid=approval.euid,
                              status=status, decided_by=approval.props.get("decided_by"))


def _on_approval(ctx: Context, approval: Obj) -> None:
    # The record's own chain is the approval's; the subject's history still shows it.
    assert ctx.subject is not None
    ctx.target = approval
    ctx.related_uids = [ctx.subject.uid]


def refuse_standing_from_requester(ctx: Context, requester: str, approval_euid: str) -> None:
    """RULES.md#approvals: a requester and a decider one account set up (one of them may be
    it: roles within the approval lifetime, a password they still sign with, or an API token
    of the requester's it gave, working within the approval lifetime) are not two people: one
    admin could make an account, set a colleague's password or hold their token, and sign
    both halves."""
    given = password_given_by(ctx.actor.username)
    if given and given.by == COMMAND_LINE:
        # whoever sat at the shell knows it, and who that was is not recorded
        raise ActionError(
            "SELF_APPROVAL", ("Your password was set from the command line, where whoever ran"
                              " the command knows it: change it (Password, at the top) before"
                              " you decide an approval." if given.until is None else
                              "You changed the password the command line set only lately:"
                              " whoever set it could have changed it as you. You decide no"
                              f" approval until {ts(given.until)}."),
            approval_euid=approval_euid, set_up_by=COMMAND_LINE)
    # the change records' own clock (they are stamped with the wall clock)
    since = timezone.now() - timedelta(seconds=int(settings.BLOOMOPS_APPROVAL_TTL_SECONDS))
    found = set_up_together(ctx.actor.username, requester, since)
    if not found:
        if given and given.decides_nothing:
            # a signature is the signer's alone: whoever gave the password knows it, and
            # could sign as them for anyone's request
            raise ActionError(
                "SELF_APPROVAL", f"Your password was given to you by {given.by}, who knows"
                " it: change it (Password, at the top) before you decide an approval.",
                approval_euid=approval_euid, set_up_by=given.by)
        return
    maker, to_requester, to_decider = found
    you, them = " > ".join(to_decider), " > ".join(to_requester)
    how = (f"{requester} set you up ({you})" if maker == requester
           else f"you set up {requester} ({them})" if maker == ctx.actor.username
           else f"{maker} set up both you ({you}) and {requester} ({them})")
    raise ActionError(
        "SELF_APPROVAL", f"{how}: roles given within the approval's lifetime, a password"
        " still in use, or an API token of theirs given within it make you no second person"
        " to them."
        " Ask someone else to decide.",
        approval_euid=approval_euid, set_up_by=maker, chain_to_requester=to_requester,
        chain_to_decider=to_decider)


class DecideApproval(_OnApproval):
    fields = ("approval_euid", "decision", "reason")
    secret_fields = ("password",)

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        text_field(req.payload, "approval_euid", required=True, max_len=KEY_MAX)
        text_field(req.payload, "reason", required=True, max_len=REASON_MAX)
        if req.payload.get("decision") not in DECISIONS:
            raise ActionError("VALIDATION_ERROR", "decision must be APPROVED or REJECTED.",
                              field="decision")
        # An approval that does not exist is said before the password is weighed: a wrong
        # password counts towards its person's lockout, and a caller naming no approval
        # (a typo, a fuzzer) locked people out of signing and signing in.
        approval = named_approval(req.payload["approval_euid"].strip(), tenant_of(req.tenant))
        # ... and so is one's own request (who asked never changes): a person deciding it
        # was told their password was wrong, or their signing locked, not that no password
        # would do
        refuse_own_request(approval, req.actor.username, tenant_of(req.tenant))
        # The electronic signature, checked before anything is locked; its password goes no
        # further than this comparison.
        problem = signature_problem(req.actor.username, req.signature_password, req.origin)
        if problem:
            raise ActionError("SIGNATURE_INVALID", problem, field="password")

    def run(self, ctx: Context) -> None:
        assert ctx.subject is not None and ctx.env is not None
        approval = ctx.target
        assert approval is not None
        p = dict(approval.props)
        requester = refuse_own_request(approval, ctx.actor.username, ctx.tenant)
        refuse_standing_from_requester(ctx, requester, approval.euid)
        ensure_role(ctx.actor.roles, action_spec(p["action_key"]))
        decision = ctx.payload["decision"]
        revision = int(ctx.env.get("revision") or 0)
        if decision == "APPROVED" and revision != p.get("subject_revision_at_request"):
            raise ActionError(
                "REVISION_CONFLICT", "The subject changed since the approval was requested"
                f" (revision {p.get('subject_revision_at_request')} then, {revision} now):"
                " request the approval again.", approval_euid=approval.euid,
                expected_revision=p.get("subject_revision_at_request"),
                current_revision=revision)
        reason = ctx.payload["reason"].strip()
        signature = {"meaning": decision.lower(), "signer": ctx.actor.username,
                     "signer_name": ctx.actor.name or display_name(ctx.actor.username),
                     "signed_at": ctx.now_ts, "method": SIGNATURE_METHOD, "reason": reason}
        p.update(status=decision, decision=decision, decided_by=ctx.actor.username,
                 decided_at=ctx.now_ts, decision_reason=reason, signature=signature)
        save_props(approval, p)
        _on_approval(ctx, approval)
        ctx.result.update(approval_status=decision, signature=signature,
                          requested_by=p["requested_by"], gated_action_key=p["action_key"])
        if decision == "APPROVED":
            from bloomops.execution.actions import HANDLERS

            # An approval asked before its action refused the fields it does not use may
            # still carry one (a hold on a requeue): never checked then, it is left out.
            uses = HANDLERS[p["action_key"]].uses
            gated = ActionRequest(
                action_key=p["action_key"], actor=ctx.actor,
                idempotency_key=f"approval:{approval.euid}", subject_euid=ctx.subject.euid,
                hold_euid=p.get("hold_lookup_euid") if "hold_euid" in uses else None,
                queue_key=p.get("queue_key") if "queue_key" in uses else None,
                expected_state=ctx.env["state"], expected_revision=revision,
                payload=dict(p.get("parameters") or {}), tenant=ctx.request.tenant,
                now=ctx.now)
            ctx.follow_up = (gated, {"approval_euid": approval.euid, "rule": p.get("rule"),
                                     "requested_by": p["requested_by"],
                                     "approved_by": ctx.actor.username,
                                     "signed_at": ctx.now_ts})


class CancelApproval(_OnApproval):
    fields = ("approval_euid", "reason")

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        text_field(req.payload, "approval_euid", required=True, max_len=KEY_MAX)
        # withdrawing is kept in the request's history as a decision is: with its reason
        text_field(req.payload, "reason", required=True, max_len=REASON_MAX)

    def run(self, ctx: Context) -> None:
        approval = ctx.target
        assert approval is not None
        p = dict(approval.props)
        if sealed_requester(approval, ctx.tenant) != ctx.actor.username \
                and not ctx.actor.is_admin:
            raise ActionError("FORBIDDEN", "Only the person who asked (or an admin) may"
                              " withdraw this request.", approval_euid=approval.euid)
        p.update(status="CANCELED", canceled_by=ctx.actor.username, canceled_at=ctx.now_ts,
                 cancel_reason=ctx.payload["reason"].strip())
        save_props(approval, p)
        _on_approval(ctx, approval)
        ctx.result.update(approval_status="CANCELED")
