"""Force-expiry of one lease and the sweep of every expired one (RULES.md#leases)."""

from __future__ import annotations

from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import (
    NOTE_MAX,
    common_checks,
    text_field,
)
from bloomops.execution.actions.steps import (
    close_lease,
    finish_record,
    record_of_lease,
)
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import (
    LEASE,
    REL,
    Obj,
    is_kind,
    load,
    parent_of,
)
from bloomops.execution.statements import LEASES_PAST_EXPIRY
from bloomops.tapdb.db import fetch_all


class ExpireQueueLease(Handler):
    fields = ("reason",)
    # it ends the lease it names; a subject or worker named beside it would not be checked
    uses = frozenset({"lease_euid"})
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        # Forcing one lease to end is an operator's decision, so it says why; the sweep ends
        # leases already past expiry and records its own reason.
        text_field(req.payload, "reason", required=bool(req.lease_euid), max_len=NOTE_MAX)

    def prepare(self, ctx: Context) -> None:
        pass

    def run(self, ctx: Context) -> None:
        req = ctx.request
        if req.lease_euid:
            found = load(euid=req.lease_euid, tenant=ctx.tenant)
            if not is_kind(found, LEASE):
                raise ActionError("NOT_FOUND", "No such lease.", lease_euid=req.lease_euid)
            assert found is not None
            # the subject first, then the lease: the order of every lease action
            subject = parent_of(found.uid, REL["subject_lease"], tenant=ctx.tenant, lock=True)
            lease = load(uid=found.uid, tenant=ctx.tenant, lock=True)
            assert lease is not None
            subjects = [subject.uid] if subject else []
            leases = [lease] if lease.props.get("status") == "ACTIVE" else []
            named = [subject.euid if subject else None]
            reason = "FORCED_EXPIRY: " + ctx.payload["reason"].strip()
        else:
            rows = fetch_all(LEASES_PAST_EXPIRY, {"tenant": ctx.tenant, "now": ctx.now_ts})
            leases = [Obj(**{k: v for k, v in r.items() if k not in ("subject_uid",
                                                                      "subject_euid")})
                      for r in rows]
            subjects = [r["subject_uid"] for r in rows if r["subject_uid"]]
            named = [r["subject_euid"] for r in rows]
            reason = "HEARTBEAT_TIMEOUT"
        if not leases:
            ctx.noop = True
            ctx.result.update(expired_lease_euids=[], expired_count=0)
            return
        for lease in leases:
            close_lease(ctx, lease, "EXPIRED", reason)
            finish_record(ctx, record_of_lease(lease), "EXPIRED", error_message=reason)
        ctx.related_uids.extend(subjects)
        ctx.target = leases[0]
        ctx.lease = leases[0] if len(leases) == 1 else None
        # the subjects whose claims ended, by name: an auditor's "every action on sample X"
        # and a period's export find the expiry (its lineage alone was not searched); named
        # by lineage, which decides, never by the lease's copy (RULES.md#leases)
        named = [e for e in named if e]
        one = len(leases) == 1
        ctx.result.update(expired_lease_euids=[lease.euid for lease in leases],
                          expired_count=len(leases),
                          lease_euid=leases[0].euid if one else None,
                          subject_euids=named, subject_euid=named[0] if one and named else None,
                          queue_key=leases[0].props.get("queue_lookup_key") if one else None)
