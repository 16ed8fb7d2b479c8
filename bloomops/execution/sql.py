"""SQL fragments of the queue visibility predicate (spec 000 3.1) and ordering (3.4).

Every selector that decides "is this subject in that queue" composes these fragments, so the
predicate has exactly one definition. ``s`` is the subject row (generic_instance), ``q`` a
queue row; parameters are ``%(tenant)s`` and ``%(now)s`` (fixed-width UTC text, see
``envelope.ts``).
"""

from __future__ import annotations

ENV = "(s.json_addl->'properties'->'execution')"
QP = "(q.json_addl->'properties')"

# coalesce(retry_at, ready_at, created_dt): the instant a subject becomes claimable.
READY_TS = (
    f"coalesce({ENV}->>'retry_at', {ENV}->>'ready_at', "
    "to_char(s.created_dt AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))"
)

HAS_ENVELOPE = "NOT s.is_deleted AND s.json_addl->'properties' ? 'execution'"

LEASE_ACTIVE = (
    "x.json_addl->'properties'->>'status' = 'ACTIVE'"
    " AND x.json_addl->'properties'->>'expires_at' > %(now)s"
)

ACTIVE_LEASE_EXISTS = f"""EXISTS (
    SELECT 1 FROM generic_instance_lineage l
    JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
    WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
      AND l.relationship_type = 'execution_subject_lease' AND {LEASE_ACTIVE})"""

ACTIVE_HOLD_EXISTS = """EXISTS (
    SELECT 1 FROM generic_instance_lineage l
    JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
    WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
      AND l.relationship_type = 'execution_subject_hold'
      AND x.json_addl->'properties'->>'status' = 'ACTIVE')"""

# Template membership: the subject's semantic template code is listed by the queue.
TEMPLATE_CODE = (
    "(coalesce(t.json_addl->>'semantic_category', t.category) || '/' || t.type || '/' "
    "|| t.subtype || '/' || t.version)"
)


def _scope(field: str) -> str:
    scope = f"{QP}->'{field}_scope'"
    return (
        f"(jsonb_array_length(coalesce({scope}, '[]'::jsonb)) = 0"
        f" OR {scope} ? coalesce(s.json_addl->'properties'->>'{field}', ''))"
    )


SCOPE_MATCH = " AND ".join(_scope(f) for f in ("site", "platform", "assay"))

# The envelope half of 3.1 (everything except lineage and the queue's template/scope list).
ENVELOPE_ELIGIBLE = f"""
    {ENV}->>'next_queue_key' = {QP}->>'queue_key'
    AND {QP}->'eligible_states' ? ({ENV}->>'state')
    AND coalesce(({ENV}->>'terminal')::boolean, false) = false
    AND coalesce(({ENV}->>'cancel_requested')::boolean, false) = false
    AND coalesce({ENV}->>'hold_state', 'NONE') <> 'ACTIVE'
    AND {READY_TS} <= %(now)s"""

# The whole of 3.1 for subject s in queue q, where t is s's template.
VISIBLE = f"""(
    {ENVELOPE_ELIGIBLE}
    AND {QP}->'subject_template_codes' ? {TEMPLATE_CODE}
    AND {SCOPE_MATCH}
    AND NOT {ACTIVE_LEASE_EXISTS}
    AND NOT {ACTIVE_HOLD_EXISTS})"""

# 3.4: priority desc, due_at asc nulls last, ready ts asc, created_dt asc, euid asc.
ORDER_BY = f"""
    coalesce(({ENV}->>'priority')::numeric, 0) DESC,
    {ENV}->>'due_at' ASC NULLS LAST,
    {READY_TS} ASC,
    s.created_dt ASC,
    s.euid ASC"""

QUEUES = """
    SELECT q.* FROM generic_instance q
    WHERE q.tenant_id = %(tenant)s AND NOT q.is_deleted
      AND q.type = 'execution' AND q.subtype = 'queue'"""
