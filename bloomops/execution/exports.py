"""Exporting a subject's evidence bundle: build it, record its sha256 through the executor,
hand back the bytes. The inspector and the API both export through here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bloomops.execution.chain import canonical_bytes, sha256_hex
from bloomops.execution.context import ActionRequest, ActionResult, Actor, action_spec
from bloomops.execution.envelope import ts
from bloomops.execution.errors import ActionError
from bloomops.execution.evidence import build_bundle
from bloomops.execution.executor import execute
from bloomops.execution.selectors.evidence import EVIDENCE_ACTION as ACTION
from bloomops.execution.selectors.evidence import subjects_acted_on
from bloomops.tapdb.tenancy import tenant_of

# The history may change between building and recording (the record builds it again under
# the subject's lock and refuses EVIDENCE_MISMATCH); a few fresh attempts then suffice.
ATTEMPTS = 3


@dataclass
class Export:
    data: bytes
    sha256: str
    result: ActionResult

    @property
    def filename(self) -> str:
        return f"evidence-{self.result['subject_euid']}-{self.sha256[:12]}.json"


def refuse_unless_allowed(actor: Actor) -> None:
    """Refused before the history is read: whoever may not record a bundle gets none."""
    spec = action_spec(ACTION)
    if not actor.roles & spec.allowed_roles:
        raise ActionError("FORBIDDEN", f"Your role may not {spec.name.lower()}.",
                          action_key=ACTION, allowed_roles=sorted(spec.allowed_roles))


def export_evidence(euid: str, actor: Actor) -> Export:
    """The bundle of a subject, recorded. The idempotency key is the bundle's hash: exporting
    an unchanged history again by the same person replays the first record."""
    refuse_unless_allowed(actor)
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


SET_FORMAT = "bloomops.evidence-set/1"


def export_evidence_set(actor: Actor, since: datetime, until: datetime, directory: Path, *,
                        queue_key: str | None = None) -> tuple[dict, str]:
    """What an auditor asks for a period (and a queue): the recorded bundle of every subject
    acted on in it, one file each, and a manifest (canonical form) naming each file with its
    sha256, with the people's changes of the period (roles, sign-in, passwords given: the
    accounts' own record, not in any bundle). Returns the manifest and its sha256; each
    bundle is verified as any other (verify_evidence), the manifest by its sha256."""
    from bloomops.accounts.models import ProfileChange

    refuse_unless_allowed(actor)
    files, missing = [], []
    for euid in subjects_acted_on(ts(since), ts(until), queue_key=queue_key,
                                  tenant=tenant_of()):
        try:
            export = export_evidence(euid, actor)
        except ActionError as err:
            if err.code != "NOT_FOUND":
                raise
            # deleted since: its records stay, its bundle cannot be built; named, not dropped
            missing.append({"subject_euid": euid, "why": err.message})
            continue
        (directory / export.filename).write_bytes(export.data)
        files.append({"subject_euid": euid, "file": export.filename,
                      "sha256": export.sha256})
    people = [{"username": c.username, "changed_by": c.changed_by,
               "changed_at": ts(c.changed_at), "reason": c.reason, "before": c.before,
               "after": c.after}
              for c in ProfileChange.objects.filter(changed_at__gte=since,
                                                    changed_at__lt=until).order_by("id")]
    manifest = {"format": SET_FORMAT, "since": ts(since), "until": ts(until),
                "queue_key": queue_key, "exported_by": actor.username, "bundles": files,
                "missing": missing, "people_changes": people}
    data = canonical_bytes(manifest)
    (directory / "manifest.json").write_bytes(data)
    return manifest, sha256_hex(data)
