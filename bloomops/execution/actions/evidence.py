"""Recording a subject's evidence bundle (RULES.md#evidence): the caller states the sha256 of
the bundle it built; under the subject's lock the bundle is built again and recorded only if
it is the same, so a recorded hash always describes one committed history."""

from __future__ import annotations

import re

from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import common_checks, require, text_field
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.errors import ActionError
from bloomops.execution.evidence import FORMAT, bloomops_version, build_bundle

EVIDENCE_CODE = "data/execution/evidence_bundle/1.0"
SHA256 = re.compile(r"[0-9a-f]{64}")


class RecordEvidenceBundle(Handler):
    fields = ("bundle_sha256",)
    uses = frozenset({"subject_euid", "expected_state", "expected_revision"})

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "subject_euid")
        sha = text_field(req.payload, "bundle_sha256", required=True, max_len=64) or ""
        if not SHA256.fullmatch(sha):
            raise ActionError("VALIDATION_ERROR", "bundle_sha256 must be 64 lowercase hex"
                              " digits.", field="bundle_sha256")

    def run(self, ctx: Context) -> None:
        assert ctx.subject is not None and ctx.env is not None
        bundle = build_bundle(ctx.subject.euid, ctx.tenant)
        assert bundle is not None  # the subject is locked
        wanted = ctx.payload["bundle_sha256"]
        if bundle.sha256 != wanted:
            raise ActionError("EVIDENCE_MISMATCH", subject_euid=ctx.subject.euid,
                              bundle_sha256=wanted, current_sha256=bundle.sha256)
        evidence = ctx.create(EVIDENCE_CODE, name=f"evidence@{ctx.subject.euid}", properties={
            "subject_lookup_euid": ctx.subject.euid,
            "bundle_sha256": bundle.sha256,
            "bundle_format": FORMAT,
            "bloomops_version": bloomops_version(),
            "generated_by": ctx.actor.username,
            "generated_at": ctx.now_ts,
            "subject_revision": ctx.env.get("revision"),
            "action_record_count": len(bundle.document["action_records"]),
        })
        ctx.link(ctx.subject, evidence, "subject_evidence")
        # The record's own chain is the evidence object's: the subject's chain (and so its
        # next bundle) stays as it was.
        ctx.target = evidence
        ctx.related_uids = [ctx.subject.uid]
        ctx.result.update(evidence_euid=evidence.euid, bundle_sha256=bundle.sha256,
                          generated_by=ctx.actor.username, generated_at=ctx.now_ts)
