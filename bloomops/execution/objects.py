"""Loading, locking and updating the TapDB objects the executor works on.

Only the executor (and its handlers) call the writing functions here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bloomops.execution.envelope import properties_of, read_envelope
from bloomops.tapdb.db import execute, fetch_all, fetch_one
from bloomops.tapdb.templates import TemplateRef
from bloomops.tapdb.tenancy import tenant_of

REL = {
    "subject_lease": "execution_subject_lease",
    "worker_lease": "execution_worker_lease",
    "queue_lease": "execution_queue_lease",
    "lease_record": "execution_lease_record",
    "subject_record": "execution_subject_record",
    "worker_record": "execution_worker_record",
    "queue_record": "execution_queue_record",
    "record_output": "execution_record_output",
    "record_supersedes": "execution_record_supersedes",
    "subject_output": "execution_subject_output",
    "subject_hold": "execution_subject_hold",
    "queue_hold": "execution_queue_hold",
    "actor_hold": "execution_actor_hold",
    "subject_dead_letter": "execution_subject_dead_letter",
    "subject_evidence": "execution_subject_evidence",
    "subject_approval": "execution_subject_approval",
    "hold_approval": "execution_hold_approval",
    "queue_dead_letter": "execution_queue_dead_letter",
    "record_dead_letter": "execution_record_dead_letter",
    "executed_on": "executed_on",
}


@dataclass
class Obj:
    uid: int
    euid: str
    name: str
    template_uid: int
    type: str
    subtype: str
    json_addl: dict[str, Any]
    created_dt: datetime
    props: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.props = properties_of(self.json_addl)

    @property
    def envelope(self) -> dict[str, Any]:
        return read_envelope(self.json_addl)

    def kind(self) -> str:
        return f"{self.type}/{self.subtype}"


_COLUMNS = "uid, euid, name, template_uid, type, subtype, json_addl, created_dt"


def _obj(row: dict | None) -> Obj | None:
    return Obj(**row) if row else None


def load(
    *, euid: str | None = None, uid: int | None = None, tenant: str | None, lock: bool = False,
    nowait: bool = False,
) -> Obj | None:
    if euid is None and uid is None:
        return None
    where = "euid = %(key)s" if euid is not None else "uid = %(key)s"
    # NO KEY UPDATE: no action changes a row's key, and a lineage edge's foreign key check
    # (KEY SHARE) on a row another action has locked then need not wait for it (a forced
    # expiry linking a subject whose completion waits on the lease was a deadlock)
    suffix = " FOR NO KEY UPDATE" + (" NOWAIT" if nowait else "") if lock else ""
    return _obj(
        fetch_one(
            f"SELECT {_COLUMNS} FROM generic_instance WHERE {where}"
            f" AND tenant_id = %(tenant)s AND NOT is_deleted{suffix}",
            {"key": euid if euid is not None else uid, "tenant": tenant},
            prepare="load",
        )
    )


def save_props(obj: Obj, props: dict[str, Any]) -> None:
    execute(
        "UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{properties}', %s::jsonb)"
        " WHERE uid = %s",
        [json.dumps(props), obj.uid],
    )
    obj.props = props


def save_record_seal(uid: int, name: str, entry: dict[str, Any]) -> None:
    """An action record's seal entry (json_addl's ``name``) written again: only
    chain.key_chains, adding the keyed seal to a record written before the key (the rest of
    the entry, and the record, unchanged)."""
    execute(f"UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{{{name}}}',"
            " %s::jsonb) WHERE uid = %s", [json.dumps(entry), uid])


def retire(obj: Obj) -> None:
    """TapDB's soft delete, for an object replaced by a successor: the row, its lineage and its
    audit trail stay; reads no longer serve it (RULES.md#queue-configuration)."""
    execute("UPDATE generic_instance SET is_deleted = true, bstatus = 'retired' WHERE uid = %s",
            [obj.uid])


def linked(parent_uid: int, child_uid: int, rel: str) -> bool:
    return bool(
        fetch_one(
            "SELECT 1 AS x FROM generic_instance_lineage WHERE parent_instance_uid = %s"
            " AND child_instance_uid = %s AND relationship_type = %s AND NOT is_deleted",
            [parent_uid, child_uid, rel],
        )
    )


def tenant_parent_sql(child: str, rel: str, alias: str) -> str:
    """The first live lineage parent through ``rel`` of ``child`` (a uid expression), of the
    tenant, as row ``alias``: the tenant is chosen before the first, so another tenant's edge
    to our object never hides our own parent (RULES.md#objects). One home for the write
    path (parent_of) and the reads (selectors.base.tenant_parent)."""
    return f"""SELECT {alias}.* FROM generic_instance_lineage e
            JOIN generic_instance {alias} ON {alias}.uid = e.parent_instance_uid
                 AND NOT {alias}.is_deleted AND {alias}.tenant_id = %(tenant)s
            WHERE e.child_instance_uid = {child} AND NOT e.is_deleted
              AND e.relationship_type = '{rel}'
            ORDER BY e.uid LIMIT 1"""


def parent_of(child_uid: int, rel: str, *, tenant: str | None,
              lock: bool = False) -> Obj | None:
    """The object ``tenant_parent_sql`` finds, loaded (and locked when asked)."""
    row = fetch_one(f"SELECT p.uid FROM ({tenant_parent_sql('%(child)s', rel, 'p')}) p",
                    {"child": child_uid, "tenant": tenant})
    return load(uid=row["uid"], tenant=tenant, lock=lock) if row else None


def children_of(
    parent_uid: int, rel: str, *, where_status: str | None = None, lock: bool = False
) -> list[Obj]:
    """Children through live edges of one relationship type (optionally by status), of the
    deployment's tenant only: another tenant's row linked to ours is never read or written."""
    status = " AND x.json_addl->'properties'->>'status' = %(status)s" if where_status else ""
    rows = fetch_all(
        f"SELECT x.uid, x.euid, x.name, x.template_uid, x.type, x.subtype, x.json_addl,"
        f" x.created_dt FROM generic_instance_lineage l"
        f" JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted"
        f" AND x.tenant_id = %(tenant)s"
        f" WHERE l.parent_instance_uid = %(parent)s AND l.relationship_type = %(rel)s"
        f" AND NOT l.is_deleted{status} ORDER BY x.uid{' FOR NO KEY UPDATE OF x' if lock else ''}",
        {"parent": parent_uid, "rel": rel, "status": where_status, "tenant": tenant_of()},
    )
    return [Obj(**r) for r in rows]


def worker_by_key(worker_key: str, *, tenant: str | None, lock: bool = False) -> Obj | None:
    return _obj(
        fetch_one(
            f"SELECT {_COLUMNS} FROM generic_instance WHERE tenant_id = %(tenant)s"
            " AND NOT is_deleted AND type = 'system' AND subtype = 'worker'"
            " AND json_addl->'properties'->>'worker_key' = %(key)s"
            f"{' FOR NO KEY UPDATE' if lock else ''}",
            {"tenant": tenant, "key": worker_key},
        )
    )


def is_kind(obj: Obj | None, kind: str) -> bool:
    return obj is not None and obj.kind() == kind


WORKER = "system/worker"
LEASE = "execution/queue_lease"
HOLD = "execution/hold"
# Never a work-bearing subject: the engine's own objects (leases, holds, records, action
# records, queues) and workers. ``is_subject`` for a loaded row, SUBJECT_SQL for row ``s``.
ENGINE_TYPES = ("execution", "execution_queue")
SUBJECT_SQL = (f"(s.type NOT IN ({', '.join(repr(t) for t in ENGINE_TYPES)})"
               f" AND (s.type, s.subtype) <> {tuple(WORKER.split('/'))!r})")


def is_engine_template(ref: TemplateRef) -> bool:
    """Queues, leases, records, holds, dead letters, workers, actions and events are the
    engine's own objects: only its actions make them, never a step's outputs, an intake or
    a queue's subjects."""
    return ref.semantic_category in ("actor", "action", "message") or ref.type in ENGINE_TYPES


def templates_named(value: str, among: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """The work-bearing templates a short name a person writes (``specimen``) may mean:
    those of that subtype, within ``among`` when given."""
    from bloomops.tapdb.templates import all_templates

    templates = all_templates()
    name = value.strip().lower()
    return [c for c in (templates if among is None else among)
            if c in templates and templates[c].subtype == name
            and not is_engine_template(templates[c])]


def full_template_code(value: str, preferred: list[str] | tuple[str, ...] = ()) -> str:
    """A template code as given, or the full code of a short name (templates_named): the
    one match, first among ``preferred`` (a queue's own); the value unchanged when none or
    several match, so the check that follows names it as it was written."""
    if not value or "/" in value:
        return value
    for among in (preferred, None):
        matches = templates_named(value, among)
        if len(matches) == 1:
            return matches[0]
        if matches:
            break
    return value


def template_words(value: str) -> str:
    """What to say of a template code that names none: the full codes its short name could
    mean, when several do."""
    named = templates_named(value) if value and "/" not in value else []
    return f" (it could mean {', '.join(named)}: write the one meant in full)" if named else ""


def is_subject_kind(type_: str | None, subtype: str | None) -> bool:
    return type_ not in ENGINE_TYPES and f"{type_}/{subtype}" != WORKER


def is_subject(obj: Obj) -> bool:
    return is_subject_kind(obj.type, obj.subtype)


QUEUE_CODE = "data/execution/queue/1.0"


def queue_properties(**overrides: Any) -> dict[str, Any]:
    """A full queue config: the queue template's defaults with the given fields set."""
    from bloomops.tapdb.templates import template_defaults

    props = template_defaults(QUEUE_CODE)
    props.update(overrides)
    return props


def name_key(name: str) -> str:
    """Two names of one tube (in any case, spaces around aside): RULES.md#intake."""
    # lower(), not casefold(): the database finds a name by lower(name) (the index
    # bloomops_subject_name), and a batch's own check must mean the same two names ("ß" and
    # "SS" are two names to it, as to the bench's scan).
    return name.strip().lower()


def repeated_names(names: list[str | None]) -> dict[int, int]:
    """RULES.md#intake: in one batch (the API's, a manifest) or one step's outputs, each new
    subject whose name an earlier one gives too (name_key), with that earlier position: a
    name is what the bench scans, and two new tubes of one name are told apart only by EUID.
    None: not a new subject (or one refused already)."""
    first: dict[str, int] = {}
    repeated: dict[int, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            continue
        key = name_key(name)
        if key in first:
            repeated[i] = first[key]
        else:
            first[key] = i
    return repeated
