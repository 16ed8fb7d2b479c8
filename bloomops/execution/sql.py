"""SQL fragments of the queue visibility predicate (spec 000 3.1) and ordering (3.4).

Every selector that decides "is this subject in that queue" composes these fragments, so the
predicate has exactly one definition. ``s`` is the subject row (generic_instance), ``q`` a
queue row; parameters are ``%(tenant)s`` and ``%(now)s`` (fixed-width UTC text, see
``envelope.ts``).
"""

from __future__ import annotations

ENV = "(s.json_addl->'properties'->'execution')"
QP = "(q.json_addl->'properties')"



def utc_text(column: str) -> str:
    """A timestamptz column as fixed-width UTC text (the format of ``envelope.ts``), written
    with immutable functions only (to_char is not), so that an index can hold it."""
    t = f"({column} AT TIME ZONE 'UTC')"

    def part(field: str, width: int) -> str:
        return f"lpad(extract({field} FROM {t})::int::text, {width}, '0')"

    us = f"lpad(extract(microseconds FROM {t})::bigint::text, 8, '0')"
    return (f"({part('year', 4)} || '-' || {part('month', 2)} || '-' || {part('day', 2)}"
            f" || 'T' || {part('hour', 2)} || ':' || {part('minute', 2)} || ':'"
            f" || substr({us}, 1, 2) || '.' || substr({us}, 3, 6) || 'Z')")


def ready_ts(alias: str = "s") -> str:
    """coalesce(retry_at, ready_at, created_dt): the instant a subject becomes claimable."""
    env = f"({alias}.json_addl->'properties'->'execution')" if alias else (
        "(json_addl->'properties'->'execution')")
    created = f"{alias}.created_dt" if alias else "created_dt"
    return f"coalesce({env}->>'retry_at', {env}->>'ready_at', {utc_text(created)})"


READY_TS = ready_ts()

# A live subject routed to a queue. Every queue read also compares next_queue_key, so this
# only restates what that implies; it is also the predicate of the partial index
# bloomops_subject_queue_order, and unlike "? 'execution'" the planner can estimate it.
HAS_ENVELOPE = f"NOT s.is_deleted AND {ENV}->>'next_queue_key' IS NOT NULL"

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
#
# Planner note: the JSON tests against the queue's lists (? on eligible_states, template
# codes, scopes) have no statistics; PostgreSQL guesses 1 % for each, multiplies the guesses
# and expects one visible row where there are thousands, then sorts instead of walking
# bloomops_subject_queue_order and probes lineage row by row where hashing is cheaper. Tested
# inside one CASE they count as a single 50 % guess. The conditions are the same; only the
# estimate changes. next_queue_key stays a plain equality (index and hash-join key) and the
# lineage exclusions stay NOT EXISTS (anti-joins).
VISIBLE = f"""(
    {ENV}->>'next_queue_key' = {QP}->>'queue_key'
    AND CASE WHEN {QP}->'eligible_states' ? ({ENV}->>'state')
              AND coalesce(({ENV}->>'terminal')::boolean, false) = false
              AND coalesce(({ENV}->>'cancel_requested')::boolean, false) = false
              AND coalesce({ENV}->>'hold_state', 'NONE') <> 'ACTIVE'
              AND {READY_TS} <= %(now)s
              AND {QP}->'subject_template_codes' ? {TEMPLATE_CODE}
              AND {SCOPE_MATCH}
             THEN true ELSE false END
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
