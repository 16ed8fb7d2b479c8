"""Creating TapDB instances and lineage edges.

These are the only INSERTs into generic_instance / generic_instance_lineage in the
code base; the executor and the seeders call them inside their own transactions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bloomops.tapdb.db import fetch_all, fetch_one
from bloomops.tapdb.models import GenericInstance
from bloomops.tapdb.templates import template
from bloomops.tapdb.tenancy import tenant_of


@dataclass(frozen=True)
class Created:
    uid: int
    euid: str
    # For an instance (not an edge): what was written, so callers need not read it back.
    name: str = ""
    json_addl: dict[str, Any] | None = None
    created_dt: datetime | None = None


_PREPARED_EDGES = 8


def _tenant(tenant_id: str | None) -> str | None:
    return tenant_of(tenant_id)


def create_instance(
    code: str,
    *,
    name: str,
    properties: dict[str, Any],
    tenant_id: str | None = None,
    created_dt: datetime | None = None,
    extra: dict[str, Any] | None = None,
) -> Created:
    ref = template(code)
    json_addl = {"semantic_category": ref.semantic_category, "properties": properties}
    if extra:
        json_addl.update(extra)
    row = fetch_one(
        """
        INSERT INTO generic_instance
            (euid, euid_prefix, euid_seq, name, tenant_id, polymorphic_discriminator,
             category, type, subtype, version, template_uid, json_addl, bstatus,
             created_dt)
        VALUES ('', '', 0, %(name)s, %(tenant)s, %(ident)s, %(category)s, %(type)s,
                %(subtype)s, %(version)s, %(template_uid)s, %(json)s::jsonb, 'active',
                coalesce(%(created)s, CURRENT_TIMESTAMP))
        RETURNING uid, euid, created_dt
        """,
        {
            "name": name,
            "tenant": _tenant(tenant_id),
            "ident": ref.polymorphic_identity,
            "category": ref.category,
            "type": ref.type,
            "subtype": ref.subtype,
            "version": ref.version,
            "template_uid": ref.uid,
            "json": json.dumps(json_addl),
            "created": created_dt,
        },
        prepare="create_instance",
    )
    assert row is not None
    return Created(uid=row["uid"], euid=row["euid"], name=name, json_addl=json_addl,
                   created_dt=row["created_dt"])


def link(
    parent_uid: int,
    child_uid: int,
    relationship_type: str,
    *,
    tenant_id: str | None = None,
) -> Created:
    """Create one lineage edge. Relationships in TapDB are lineage edges only (RULES.md#objects)."""
    return link_many([(parent_uid, child_uid, relationship_type)], tenant_id=tenant_id)[0]


def link_many(
    edges: list[tuple[int, int, str]], *, tenant_id: str | None = None
) -> list[Created]:
    if not edges:
        return []
    values = ", ".join(f"(%(p{i})s::bigint, %(c{i})s::bigint, %(r{i})s::text)"
                       for i in range(len(edges)))
    params: dict[str, Any] = {"tenant": _tenant(tenant_id)}
    for i, (parent, child, rel) in enumerate(edges):
        params.update({f"p{i}": parent, f"c{i}": child, f"r{i}": rel})
    # Prepared per number of edges, up to the handful an action links (a claim links seven):
    # planning the join with generic_instance's indexes cost about 1 ms a statement.
    rows = fetch_all(
        f"""
        INSERT INTO generic_instance_lineage
            (euid, euid_prefix, euid_seq, name, tenant_id, polymorphic_discriminator,
             parent_instance_uid, child_instance_uid, parent_type, child_type,
             relationship_type)
        SELECT '', '', 0, e.rel, %(tenant)s::uuid, 'generic_instance_lineage',
               e.parent, e.child, p.polymorphic_discriminator, c.polymorphic_discriminator,
               e.rel
        FROM (VALUES {values}) AS e(parent, child, rel)
        JOIN generic_instance p ON p.uid = e.parent
        JOIN generic_instance c ON c.uid = e.child
        RETURNING uid, euid
        """,
        params,
        prepare=f"link_{len(edges)}" if len(edges) <= _PREPARED_EDGES else None,
    )
    if len(rows) != len(edges):
        raise LookupError("lineage endpoint does not exist")
    return [Created(uid=r["uid"], euid=r["euid"]) for r in rows]


def children(instance_uid: int, relationship_type: str | None = None):
    """Instances this one points to through live lineage edges."""
    edge = {"parent_edges__parent_instance_id": instance_uid, "parent_edges__is_deleted": False}
    if relationship_type:
        edge["parent_edges__relationship_type"] = relationship_type
    # One filter() call so every condition applies to the same edge.
    return GenericInstance.objects.filter(**edge).order_by("uid").distinct()


def parents(instance_uid: int, relationship_type: str | None = None):
    """Instances pointing to this one through live lineage edges."""
    edge = {"child_edges__child_instance_id": instance_uid, "child_edges__is_deleted": False}
    if relationship_type:
        edge["child_edges__relationship_type"] = relationship_type
    return GenericInstance.objects.filter(**edge).order_by("uid").distinct()
