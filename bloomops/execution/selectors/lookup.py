"""An object the inspector is asked for that is not a subject: the engine's own (a hold, an
approval, a lease, a record, an action record, a worker, a queue), named on every screen
and in every bundle, found with the subject it belongs to."""

from __future__ import annotations

from typing import Any

from bloomops.execution.selectors.base import read_params
from bloomops.tapdb.db import fetch_one


def engine_object(euid: str, *, tenant: str | None = None) -> dict[str, Any] | None:
    """The lab's object with this EUID (type, subtype, and ``subject_euid``: the subject it
    belongs to, as it names it or as lineage does), or None. One query (the EUID index)."""
    if not euid or not euid.isprintable():
        return None
    return fetch_one(
        """SELECT o.euid, o.type, o.subtype, coalesce(
                   o.json_addl->>'subject_lookup_euid',
                   o.json_addl->'properties'->>'subject_lookup_euid',
                   (SELECT p.euid FROM generic_instance_lineage l
                    JOIN generic_instance p ON p.uid = l.parent_instance_uid
                    WHERE l.child_instance_uid = o.uid AND NOT l.is_deleted
                      AND l.relationship_type LIKE 'execution\\_subject\\_%%'
                      AND p.tenant_id = %(tenant)s
                    ORDER BY l.uid LIMIT 1)) AS subject_euid
           FROM generic_instance o
           WHERE o.euid = upper(%(euid)s) AND o.tenant_id = %(tenant)s AND NOT o.is_deleted""",
        read_params(None, tenant, euid=euid.strip()))
