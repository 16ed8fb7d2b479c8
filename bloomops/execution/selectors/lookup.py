"""An object the inspector is asked for that is not a subject: the engine's own (a hold, an
approval, a lease, a record, an action record, a worker, a queue), named on every screen
and in every bundle, found with the subject it belongs to; and, when a label means nothing,
the subjects whose name or EUID holds it."""

from __future__ import annotations

from typing import Any

from bloomops.execution.objects import SUBJECT_SQL
from bloomops.execution.selectors.base import read_params
from bloomops.execution.sql import ENV
from bloomops.tapdb.db import fetch_all, fetch_one


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


# How many subjects a lookup that matched none suggests.
SUGGESTED = 20


def subjects_like(text: str, *, tenant: str | None = None) -> list[dict[str, Any]]:
    """When a typed label means no subject: those whose name or EUID holds it (any case),
    the newest first, SUGGESTED at most ("0148" for "Tube 0148"). One query; it reads the
    lab's subjects' names, asked only when a lookup found nothing."""
    text = text.strip()
    if len(text) < 2 or not text.isprintable():
        return []
    pattern = "%" + text.lower().replace("\\", "\\\\").replace("%", "\\%").replace(
        "_", "\\_") + "%"
    return fetch_all(
        f"""SELECT s.euid, s.name, s.created_dt, {ENV}->>'state' AS state,
                   {ENV}->>'next_queue_key' AS queue_key,
                   s.json_addl->'properties'->>'site' AS site
            FROM generic_instance s
            WHERE s.tenant_id = %(tenant)s AND NOT s.is_deleted AND {SUBJECT_SQL}
              AND (lower(s.name) LIKE %(pattern)s OR lower(s.euid) LIKE %(pattern)s)
            ORDER BY s.uid DESC LIMIT {SUGGESTED}""",
        read_params(None, tenant, pattern=pattern))
