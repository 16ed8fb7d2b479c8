"""A subject's evidence bundle (RULES.md#evidence): building it from the database in its
canonical form, and verifying a file against what was recorded and what is stored now."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from bloomops.execution.binding import binding_problems, first_difference, short
from bloomops.execution.chain import (
    CHAIN,
    KEYED,
    another_writers,
    canonical_bytes,
    content_hash,
    keyed_problem,
    sha256_hex,
)
from bloomops.execution.guards import load_json
from bloomops.execution.selectors.evidence import (
    EVIDENCE_ACTION,
    EVIDENCE_REL,
    evidence_action_records,
    evidence_approvals,
    evidence_audit_rows,
    recorded_bundles,
    subject_row,
)
from bloomops.execution.selectors.subjects import lineage_of, subject_history
from bloomops.execution.verification import subject_chain_breaks

FORMAT = "bloomops.evidence/1"
# Sections whose entries are never rewritten by bloomops: a change or a removal is tampering.
APPEND_ONLY = ("action_records", "lineage", "audit")
# Snapshots of objects the executor changes: they may differ later only together with new
# action records (every legitimate change is an action).
SNAPSHOTS = ("leases", "execution_records", "holds", "dead_letters", "outputs", "approvals")
# The field of a snapshot's object, per section, and its value while the executor may still
# change the object: once it is anything else (a lease ended, a record finished, a hold
# released, a letter resolved, an approval decided or withdrawn), nothing changes it again,
# so no later action explains a difference.
_OPEN_WHILE = {"leases": ("status", ("ACTIVE",)), "execution_records": ("status", ("STARTED",)),
               "holds": ("status", ("ACTIVE",)),
               # a requeue closes REQUEUED the letters a cancel (or ignore) closed too
               # (steps.resolve_dead_letters): only REQUEUED is final
               "dead_letters": ("resolution_state", ("OPEN", "CANCELED", "IGNORED")),
               "approvals": ("status", ("REQUESTED",))}
_HISTORY = {"leases": "leases", "execution_records": "records", "holds": "holds",
            "dead_letters": "dead_letters", "outputs": "outputs"}


def bloomops_version() -> str:
    try:
        return version("bloomops")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without install
        return "unknown"


def _when(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _obj(row: dict[str, Any]) -> dict[str, Any]:
    return {"euid": row["euid"], "name": row["name"], "created_dt": _when(row["created_dt"]),
            "properties": row["props"] or {}}


@dataclass
class Bundle:
    document: dict[str, Any]
    data: bytes
    sha256: str
    subject_uid: int


def build_bundle(euid: str, tenant: str | None) -> Bundle | None:
    """The bundle of a subject as the database holds it now; None for no such subject."""
    subject = subject_row(euid, tenant)
    if subject is None:
        return None
    history = subject_history(subject["uid"])
    records = evidence_action_records(subject["uid"])
    approvals = evidence_approvals(subject["uid"])
    # Edges written in one transaction share a timestamp: sorted in full, for a stable order.
    lineage = sorted((e for e in lineage_of(subject["uid"])
                      if e["relationship_type"] != EVIDENCE_REL
                      and e["subtype"] != EVIDENCE_ACTION),
                     key=lambda e: (e["created_dt"], e["direction"], e["relationship_type"],
                                    e["euid"]))
    uids = [subject["uid"], *(r["uid"] for rows in history.values() for r in rows),
            *(a["uid"] for a in approvals)]
    doc = {
        "format": FORMAT,
        "bloomops_version": bloomops_version(),
        "subject": {**_obj(subject), "template_code": subject["template_code"]},
        **{section: [_obj(r) for r in history[key]] for section, key in _HISTORY.items()},
        # Each with its request, decision and electronic signature (RULES.md#approvals).
        "approvals": [_obj(a) for a in approvals],
        "action_records": [{"euid": r["euid"], "action_key": r["action_key"],
                            "created_dt": _when(r["created_dt"]), "record": r["json_addl"]}
                           for r in records],
        "lineage": [{"direction": e["direction"], "relationship_type": e["relationship_type"],
                     "euid": e["euid"], "type": e["type"], "subtype": e["subtype"],
                     "created_dt": _when(e["created_dt"])} for e in lineage],
        "audit": [{"euid": a["euid"], "object_euid": a["object_euid"],
                   "changed_at": _when(a["changed_at"]), "changed_by": a["changed_by"],
                   "operation_type": a["operation_type"], "column_name": a["column_name"],
                   "old_value": a["old_value"], "new_value": a["new_value"]}
                  for a in evidence_audit_rows(uids)],
    }
    data = canonical_bytes(doc)
    return Bundle(document=doc, data=data, sha256=sha256_hex(data), subject_uid=subject["uid"])


# What verify_bundle checks, in order, in the words every verdict carries (RULES.md#evidence).
CHECKS = (
    "the file is a bloomops.evidence/1 bundle laid out byte for byte as bloomops writes"
    " one (canonical form: not re-formatted; whether its contents were edited is what"
    " the checks below decide)",
    "every action record in the file matches its own seal (the sha256 of its canonical"
    " form, its seals left out)",
    "the file's sha256 is one recorded for its subject (who generated it, when)",
    "every entry of the file is compared with the database, field by field: action records,"
    " lineage and audit rows must be unchanged; snapshots may differ only after later"
    " actions, never once final; nothing the file's own action records name may be missing",
    "every hash chain the subject's action records are on is unbroken in the database, and"
    " no record of the subject's or its approvals' chains is missing from its history",
    "the bundle agrees with its own sealed records, in the file and in the database: every"
    " approval's decision and signature, and every hold's code, reason and placer, is the"
    " one its sealed record carries, and no sealed record's predecessor on the subject's"
    " or an approval's chain is missing",
)


@dataclass
class Verdict:
    """What verify_bundle found. ok: the file is a recorded bundle and nothing it describes
    was changed or removed since (later history may have been added)."""

    subject_euid: str | None
    sha256: str
    recorded: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    later: list[str] = field(default_factory=list)
    # Per check of CHECKS: "passed", "failed", or "not run" (a file that is no bundle is
    # compared with nothing).
    outcomes: list[str] = field(default_factory=lambda: ["not run"] * len(CHECKS))
    # The file's document when it is a bundle at all (what a page shows it records).
    document: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return bool(self.recorded) and not self.problems

    def found(self, check: int, problems: list[str]) -> None:
        """The outcome of CHECKS[check], with the problems it found."""
        self.problems += problems
        self.outcomes[check] = "failed" if problems else "passed"

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "subject_euid": self.subject_euid, "bundle_sha256": self.sha256,
                "recorded": self.recorded, "problems": self.problems, "later": self.later,
                "checked": list(CHECKS), "outcomes": list(self.outcomes)}


# Fields of a snapshot no action ever changes once the object exists: a difference is never
# explained by a later action (a hold's code decides whether releasing it needs a second person).
_IMMUTABLE = {"holds": ("hold_code", "reason", "placed_at", "placed_by_lookup_euid",
                        "subject_lookup_euid", "state_before_hold")}


def _entry_id(section: str, entry: Any) -> str:
    if not isinstance(entry, dict):
        return short(entry)
    if section == "lineage":
        return f"{entry.get('direction')}:{entry.get('relationship_type')}:{entry.get('euid')}"
    return str(entry.get("euid"))


def _final(section: str, entry: Any) -> bool:
    """Whether the file's snapshot is of an object the executor no longer changes."""
    if section not in _OPEN_WHILE or not isinstance(entry, dict):
        return False
    props = entry.get("properties")
    name, open_values = _OPEN_WHILE[section]
    return isinstance(props, dict) and props.get(name) not in (None, *open_values)


def _named_by(records: list[Any]) -> set[str]:
    """The EUIDs action records name as facts: the record before each in its chain, and the
    objects each made or acted on (its result's ``*_euid`` and ``*_euids``). Never free text
    (a reason, a snapshot), which anyone may fill with a future EUID."""
    named: set[str] = set()
    for entry in records:
        record = entry.get("record") if isinstance(entry, dict) else None
        if not isinstance(record, dict):
            continue
        chain, result = record.get(CHAIN), record.get("result")
        if isinstance(chain, dict) and isinstance(chain.get("previous_euid"), str):
            named.add(chain["previous_euid"])
        for key, value in (result.items() if isinstance(result, dict) else ()):
            if key.endswith("_euid") and isinstance(value, str):
                named.add(value)
            elif key.endswith("_euids") and isinstance(value, list):
                named.update(v for v in value if isinstance(v, str))
    return named


def _compare(doc: dict[str, Any], now: dict[str, Any]
             ) -> tuple[list[str], list[str], list[str], bool]:
    """(changed or removed entries, changed snapshots a later action may explain, entries
    added since, whether actions were added since). An entry the file's own action records
    name (``_named_by``) was cut out of the file, not added since: commit order, which no
    timestamp gives (a transaction stamps its rows when it starts, and may commit after a
    file is made)."""
    changed: list[str] = []
    explicable: list[str] = []
    added: list[str] = []
    named = _named_by(doc.get("action_records") or [])
    # the objects another writer's records since name (Bloom's): Bloom changes what bloomops
    # holds final (it releases a hold bloomops ended), so such an object's snapshot is later
    # history too; an empty row inserted beside the subject names nothing
    known = {_entry_id("action_records", e) for e in doc.get("action_records") or []}
    since = [e for e in now.get("action_records") or [] if isinstance(e, dict)
             and another_writers(e.get("record"))
             and _entry_id("action_records", e) not in known]
    others_named = _named_by(since) | {v for e in since for v in (
        e["record"].get("target_euid"), e["record"].get("lease_lookup_euid"))}
    for section in (*APPEND_ONLY, *SNAPSHOTS):
        mine = {_entry_id(section, e): e for e in doc.get(section) or []}
        theirs = {_entry_id(section, e): e for e in now.get(section) or []}
        for key, entry in mine.items():
            where = f"{section}[{key}]"
            if key not in theirs:
                changed.append(f"{where}: in the file, no longer in the database")
                continue
            if section == "outputs":
                # an output is a subject of its own: its envelope moves with its own actions,
                # which its own bundle holds (never one of this subject's)
                entry, other = _without_envelope(entry), _without_envelope(theirs[key])
            elif section == "action_records":
                # the keyed seal may be added to a record written before the seal key
                # (key_chains); it seals, it is not what was done (chain.SEALS)
                entry, other = _unkeyed(entry), _unkeyed(theirs[key])
            else:
                other = theirs[key]
            fixed = [d for name in _IMMUTABLE.get(section, ())
                     if (d := first_difference(f"{where}.properties.{name}",
                                                _prop(entry, name), _prop(other, name)))]
            changed += fixed
            if not fixed and (diff := first_difference(where, entry, other)) is not None:
                # A later action explains a changed snapshot, never a vanished object or
                # one that was final.
                open_snapshot = section in SNAPSHOTS and (key in others_named
                                                           or not _final(section, entry))
                (explicable if open_snapshot else changed).append(diff)
        for key, entry in theirs.items():
            if key in mine:
                continue
            euid = entry.get("euid") if isinstance(entry, dict) else None
            if section != "audit" and isinstance(euid, str) and euid in named:
                changed.append(f"{section}[{key}]: named by the file's own action records,"
                               " but missing from the file")
            else:
                added.append(f"{section}[{key}]: added since")
    mine_s, theirs_s = doc.get("subject") or {}, now.get("subject") or {}
    # only queue actions change a subject (_MOVING), and only what they change may differ
    explicable += [d for name in _MOVING if (d := first_difference(
        f"subject.properties.{name}", _prop(mine_s, name), _prop(theirs_s, name)))]
    rest = _without_envelope(mine_s), _without_envelope(theirs_s)
    mine_p, theirs_p = rest[0].get("properties"), rest[1].get("properties")
    if isinstance(mine_p, dict) and isinstance(theirs_p, dict):
        for name in sorted(set(mine_p) | set(theirs_p)):
            if fixed := first_difference(f"subject.properties.{name}", mine_p.get(name),
                                          theirs_p.get(name)):
                changed.append(fixed)
    # a file's properties that are no object are named whole (a list's items are no keys)
    elif fixed := first_difference("subject.properties", mine_p, theirs_p):
        changed.append(fixed)
    for name in sorted((set(rest[0]) | set(rest[1])) - {"properties"}):
        if fixed := first_difference(f"subject.{name}", rest[0].get(name), rest[1].get(name)):
            changed.append(fixed)
    acted_since = any(a.startswith("action_records[") for a in added)
    return changed, explicable, added, acted_since


def _prop(entry: Any, name: str) -> Any:
    props = entry.get("properties") if isinstance(entry, dict) else None
    return props.get(name) if isinstance(props, dict) else None


def _unkeyed(entry: Any) -> Any:
    record = entry.get("record") if isinstance(entry, dict) else None
    seal = record.get(CHAIN) if isinstance(record, dict) else None
    if not isinstance(seal, dict):
        return entry
    return {**entry, "record": {**record, CHAIN: {k: v for k, v in seal.items()
                                                  if k not in KEYED}}}


# What queue actions change of a subject: the envelope, and Bloom's copy of its queue
# (``current_queue``, which Bloom's own queue actions set on a shared database).
_MOVING = ("execution", "current_queue")


def _without_envelope(entry: Any) -> Any:
    if not isinstance(entry, dict) or not isinstance(entry.get("properties"), dict):
        return entry
    return {**entry, "properties": {k: v for k, v in entry["properties"].items()
                                    if k not in _MOVING}}


def verify_bundle(data: bytes, tenant: str | None) -> Verdict:
    """Is this file a recorded bundle, and is the history it describes unchanged since?
    Every problem names the entry and field (RULES.md#evidence)."""
    verdict = Verdict(subject_euid=None, sha256=sha256_hex(data))
    doc, not_a_bundle = _as_bundle(data)
    if not_a_bundle:
        verdict.found(0, [not_a_bundle])
        return verdict
    verdict.subject_euid, verdict.document = doc["subject"]["euid"], doc
    verdict.found(0, [] if canonical_bytes(doc) == data else
                  ["file: not in canonical form (it was re-written or edited)"])
    edited = []
    for entry in doc.get("action_records") or []:
        record = entry.get("record") if isinstance(entry, dict) else None
        seal = (record or {}).get(CHAIN) if isinstance(record, dict) else None
        if isinstance(seal, dict) and content_hash(record) != seal.get("sha256"):
            edited.append(f"file: action_records[{entry.get('euid')}] differs from its seal"
                          " (the record was edited in the file)")
        elif isinstance(seal, dict) and "hmac" in seal and (problem := keyed_problem(seal)):
            # re-sealed in the file: its sha256 agrees again, the keyed seal cannot
            edited.append(f"file: action_records[{entry.get('euid')}] {problem}")
    verdict.found(1, edited)
    now = build_bundle(verdict.subject_euid, tenant)
    if now is None:
        verdict.found(3, [f"database: subject {verdict.subject_euid} no longer exists"])
        return verdict
    verdict.recorded = [{"evidence_euid": r["euid"], **r["props"]}
                        for r in recorded_bundles(now.subject_uid, verdict.sha256)]
    if not verdict.recorded:
        source = "file"
        if recorded_bundles(now.subject_uid, now.sha256):
            detail = "; the database still matches a recorded bundle, so the file was edited"
        else:
            detail = ""
        verdict.found(2, [f"file: its sha256 {verdict.sha256} matches no evidence bundle"
                          f" recorded for {verdict.subject_euid}{detail}"])
    else:
        verdict.found(2, [])
        source = "database"
    changed, explicable, added, acted_since = _compare(doc, now.document)
    if acted_since:
        verdict.later += [f"{c} (changed by a later action)" for c in explicable]
    else:
        changed += explicable
    verdict.found(3, [f"{source}: {c}" for c in changed])
    verdict.later += added
    verdict.found(4, [f"database: {b}" for b in subject_chain_breaks(
        tenant, verdict.subject_euid, now.subject_uid)])
    # the database's own bundle too: a file exported after a snapshot was edited agrees with
    # the database, but not with the sealed records in it
    verdict.found(5, [f"file: {p}" for p in binding_problems(doc)]
                  + [f"database: {p}" for p in binding_problems(now.document)])
    return verdict


def _as_bundle(data: bytes) -> tuple[Any, str | None]:
    """The file's document, or why it is no bundle at all."""
    try:
        doc = load_json(data)
    except ValueError as exc:
        return None, f"file: not a bundle's JSON ({exc})"
    subject = doc.get("subject") if isinstance(doc, dict) else None
    if not isinstance(subject, dict) or doc.get("format") != FORMAT \
            or not isinstance(subject.get("euid"), str):
        return None, f"file: not a {FORMAT} evidence bundle"
    # No EUID holds a control or invisible character (and PostgreSQL refuses a NUL).
    if not subject["euid"] or not subject["euid"].isprintable():
        return None, f"file: not a {FORMAT} evidence bundle (subject.euid is not an EUID)"
    misshapen = [name for name in (*APPEND_ONLY, *SNAPSHOTS)
                 if doc.get(name) is not None and not isinstance(doc[name], list)]
    if misshapen:
        return None, f"file: not a {FORMAT} evidence bundle ({misshapen[0]} is not a list)"
    return doc, None
