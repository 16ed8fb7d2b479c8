"""Exporting a subject's evidence bundle: build it, record its sha256 through the executor,
hand back the bytes. The inspector and the API both export through here."""

from __future__ import annotations

from dataclasses import dataclass

from bloomops.execution.context import ActionRequest, ActionResult, Actor, action_spec
from bloomops.execution.errors import ActionError
from bloomops.execution.evidence import build_bundle
from bloomops.execution.executor import execute
from bloomops.tapdb.tenancy import tenant_of

# The history may change between building and recording (the record builds it again under
# the subject's lock and refuses EVIDENCE_MISMATCH); a few fresh attempts then suffice.
ATTEMPTS = 3
ACTION = "record_evidence_bundle"


@dataclass
class Export:
    data: bytes
    sha256: str
    result: ActionResult

    @property
    def filename(self) -> str:
        return f"evidence-{self.result['subject_euid']}-{self.sha256[:12]}.json"


def export_evidence(euid: str, actor: Actor) -> Export:
    """The bundle of a subject, recorded. The idempotency key is the bundle's hash: exporting
    an unchanged history again by the same person replays the first record."""
    spec = action_spec(ACTION)
    if not actor.roles & spec.allowed_roles:
        # Refused before the history is read: whoever may not record a bundle gets none.
        raise ActionError("FORBIDDEN", f"Your role may not {spec.name.lower()}.",
                          action_key=ACTION, allowed_roles=sorted(spec.allowed_roles))
    for attempt in range(ATTEMPTS):
        bundle = build_bundle(euid, tenant_of())
        if bundle is None:
            raise ActionError("NOT_FOUND", "No such subject.", subject_euid=euid)
        try:
            result = execute(ActionRequest(
                action_key=ACTION, actor=actor, idempotency_key=f"evidence-{bundle.sha256}",
                subject_euid=euid,
                payload={"bundle_sha256": bundle.sha256}))
        except ActionError as exc:
            if exc.code == "EVIDENCE_MISMATCH" and attempt + 1 < ATTEMPTS:
                continue
            raise
        return Export(data=bundle.data, sha256=bundle.sha256, result=result)
    raise AssertionError("unreachable")  # pragma: no cover
