"""The reads behind a subject's evidence bundle (RULES.md#evidence) that the inspector does
not need: the subject row as stored, full action records, full TapDB audit rows, and the
bundles recorded for a subject. The bundle's own bookkeeping (evidence objects and the
actions that recorded them) is left out, so recording a bundle does not change the next."""

from __future__ import annotations

from typing import Any

from bloomops.execution.objects import REL, SUBJECT_SQL
from bloomops.execution.params import read_params
from bloomops.execution.sql import TEMPLATE_CODE, TEMPLATES, utc
from bloomops.tapdb.db import fetch_all, fetch_one

EVIDENCE_ACTION = "record_evidence_bundle"
EVIDENCE_REL = "execution_subject_evidence"


def subject_row(euid: str, tenant: str | None) -> dict[str, Any] | None:
    """A subject as stored (objects.SUBJECT_SQL: not the engine's own, not a worker)."""
    return fetch_one(
        f"""SELECT s.uid, s.euid, s.name, s.created_dt, s.json_addl->'properties' AS props,
               {TEMPLATE_CODE} AS template_code
        FROM generic_instance s JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE s.euid = %(euid)s AND s.tenant_id = %(tenant)s AND NOT s.is_deleted
          AND {SUBJECT_SQL}""",
        {"euid": euid, "tenant": tenant},
    )


def evidence_action_records(instance_uid: int) -> list[dict[str, Any]]:
    """Every live action record executed on an instance or on one of its leases (Bloom
    records a renewal, a release or an expiry on the lease alone), as stored. One query."""
    return fetch_all(
        """
        SELECT DISTINCT a.uid, a.euid, a.subtype AS action_key, a.created_dt, a.json_addl
        FROM generic_instance_lineage l
        JOIN generic_instance a ON a.uid = l.parent_instance_uid AND NOT a.is_deleted
             AND a.tenant_id = %(tenant)s
        WHERE l.relationship_type = 'executed_on' AND NOT l.is_deleted
          AND a.subtype <> %(evidence)s
          -- the instance and its leases as one array: each a probe of the edges' index
          AND l.child_instance_uid = ANY(ARRAY[%(uid)s::bigint] || ARRAY(
                SELECT sl.child_instance_uid FROM generic_instance_lineage sl
                WHERE sl.parent_instance_uid = %(uid)s AND NOT sl.is_deleted
                  AND sl.relationship_type = %(lease)s))
        ORDER BY a.uid
        """,
        read_params(None, None, uid=instance_uid, evidence=EVIDENCE_ACTION,
                    lease=REL["subject_lease"]),
    )


def evidence_audit_rows(instance_uids: list[int]) -> list[dict[str, Any]]:
    """TapDB's audit rows of these instances, values in full. One query."""
    return fetch_all(
        """
        SELECT a.uid, a.euid, a.rel_table_euid_fk AS object_euid, a.changed_at, a.changed_by,
               a.operation_type, a.column_name, a.old_value, a.new_value
        FROM audit_log a
        WHERE a.rel_table_name = 'generic_instance' AND a.rel_table_uid_fk = ANY(%s)
        ORDER BY a.uid
        """,
        [instance_uids],
    )


def recorded_bundles(subject_uid: int, sha256: str | None = None) -> list[dict[str, Any]]:
    """Evidence bundles recorded for a subject (of one sha256), oldest first. One query."""
    return fetch_all(
        """
        SELECT x.euid, x.json_addl->'properties' AS props
        FROM generic_instance_lineage l
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
             AND x.tenant_id = %(tenant)s
        WHERE l.parent_instance_uid = %(uid)s AND l.relationship_type = %(rel)s
          AND NOT l.is_deleted
          AND (%(sha)s::text IS NULL OR x.json_addl->'properties'->>'bundle_sha256' = %(sha)s)
        ORDER BY x.uid
        """,
        read_params(None, None, uid=subject_uid, rel=EVIDENCE_REL, sha=sha256),
    )


def evidence_approvals(subject_uid: int) -> list[dict[str, Any]]:
    """A subject's approvals with their signatures, as stored, oldest first (RULES.md#approvals).
    One query."""
    return fetch_all(
        """
        SELECT x.uid, x.euid, x.name, x.created_dt, x.json_addl->'properties' AS props
        FROM generic_instance_lineage l
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
             AND x.tenant_id = %(tenant)s
        WHERE l.parent_instance_uid = %(uid)s AND NOT l.is_deleted
          AND l.relationship_type = 'execution_subject_approval'
        ORDER BY x.uid
        """,
        read_params(None, None, uid=subject_uid),
    )


def subjects_acted_on(since: str, until: str, *, queue_key: str | None = None,
                      tenant: str | None = None) -> list[str]:
    """The subjects some action was taken on from ``since`` up to ``until`` (our UTC text),
    in the order first acted on: what an auditor's export of a period holds. With a queue,
    those some action of theirs (at any time) was taken in that queue: a hold's release or a
    cancel names none, and the subject it ended is the queue's all the same. Recording a
    bundle is not such an action. One query (every action record of the tenant: an export,
    not a page)."""
    return [r["euid"] for r in fetch_all(
        f"""SELECT a.euid FROM (
            SELECT named.euid, min(a.uid) AS first
            FROM generic_instance a
            -- the subject it names, and each of a sweep's (the claims it ended, by subject)
            CROSS JOIN LATERAL (
                SELECT a.json_addl->>'subject_lookup_euid' AS euid
                UNION SELECT jsonb_array_elements_text(
                    CASE WHEN jsonb_typeof(a.json_addl->'result'->'subject_euids') = 'array'
                         THEN a.json_addl->'result'->'subject_euids' END)) named
            WHERE a.tenant_id = %(tenant)s AND NOT a.is_deleted AND a.type = 'execution_queue'
              AND a.subtype <> '{EVIDENCE_ACTION}'
              AND coalesce(named.euid, '') <> ''
              AND {utc("a.json_addl->>'executed_at'")} >= %(since)s
              AND {utc("a.json_addl->>'executed_at'")} < %(until)s
            GROUP BY 1) a
        WHERE %(queue)s::text IS NULL OR EXISTS (
            SELECT 1 FROM generic_instance q
            WHERE q.tenant_id = %(tenant)s AND NOT q.is_deleted AND q.type = 'execution_queue'
              AND q.json_addl->>'subject_lookup_euid' = a.euid
              AND q.json_addl->>'queue_lookup_key' = %(queue)s)
        ORDER BY a.first""",
        read_params(None, tenant, since=since, until=until, queue=queue_key))]
