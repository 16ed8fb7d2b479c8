"""SQL fragments of the queue visibility predicate (spec 000 3.1) and ordering (3.4).

Every selector that decides "is this subject in that queue" composes these fragments, so the
predicate has exactly one definition. ``s`` is the subject row (generic_instance), ``q`` a
queue row; parameters are ``%(tenant)s`` and ``%(now)s`` (fixed-width UTC text, see
``envelope.ts``).
"""

from __future__ import annotations

from bloomops.execution.envelope import HOLD_STATES
from bloomops.execution.states import ALL_STATES

ENV = "(s.json_addl->'properties'->'execution')"
# A queue's config, a column of the QUEUES sub-query below (computed once per queue).
QP = "q.config"



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

# Templates with their semantic code.
TEMPLATES = """
    SELECT t.uid, (coalesce(t.json_addl->>'semantic_category', t.category) || '/' || t.type
                   || '/' || t.subtype || '/' || t.version) AS code
    FROM generic_template t"""

# Template membership: the subject's semantic template code is listed by the queue.
TEMPLATE_CODE = "t.code"


def _scope(field: str) -> str:
    scope = f"q.{field}_scope"
    return (
        f"(jsonb_array_length({scope}) = 0"
        f" OR {scope} ? coalesce(s.json_addl->'properties'->>'{field}', ''))"
    )


SCOPE_MATCH = " AND ".join(_scope(f) for f in ("site", "platform", "assay"))



def env_flag(name: str) -> str:
    """An envelope flag, true only for JSON true: a cast (``::boolean``) would make one bad
    row written by anyone fail the whole statement."""
    return f"coalesce({ENV}->'{name}' = 'true'::jsonb, false)"


TERMINAL = env_flag("terminal")
# The subject's revision, or NULL when a writer stored something else (never a failed cast).
SUBJECT_REVISION = (f"CASE WHEN ({ENV}->>'revision') ~ '^[0-9]{{1,18}}$'"
                    f" THEN ({ENV}->>'revision')::bigint END")
# A queue's dispatch priority (5.4 order), 0 when it is not a number.
DISPATCH_PRIORITY = ("CASE WHEN jsonb_typeof(q.config->'dispatch_priority') = 'number'"
                     " THEN (q.config->>'dispatch_priority')::numeric ELSE 0 END")
CANCEL_REQUESTED = env_flag("cancel_requested")


def _json_type(name: str, *types: str) -> str:
    allowed = ", ".join(f"'{t}'" for t in (*types, "null"))
    return f"coalesce(jsonb_typeof({ENV}->'{name}'), 'null') IN ({allowed})"


def _timestamp_or_null(name: str) -> str:
    return (f"({_json_type(name)} OR ({ENV}->>'{name}')"
            " ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}')")


# The types the engine needs of a stored envelope, in SQL: a subject whose envelope fails
# them is never visible and never claimable (RULES.md#envelope). envelope.envelope_problems
# is the same rule for Python readers, which also name the bad field.
def _whole_or_null(name: str, pattern: str = "^[0-9]+$") -> str:
    return (f"({_json_type(name)} OR (jsonb_typeof({ENV}->'{name}') = 'number'"
            f" AND ({ENV}->>'{name}') ~ '{pattern}'))")


ENVELOPE_VALID = " AND ".join([
    f"jsonb_typeof({ENV}) = 'object'",
    "({ENV}->>'state') IN ({states})".format(
        ENV=ENV, states=", ".join(f"'{s}'" for s in ALL_STATES)),
    _whole_or_null("revision"), _whole_or_null("attempt_count"),
    _whole_or_null("max_attempts_override", "^[1-9][0-9]*$"),
    _json_type("priority", "number"),
    *(_json_type(n, "string") for n in ("next_queue_key", "next_action_key", "hold_reason",
                                         "last_execution_record_euid")),
    _json_type("terminal", "boolean"), _json_type("cancel_requested", "boolean"),
    "coalesce({ENV}->>'hold_state', 'NONE') IN ({hs})".format(
        ENV=ENV, hs=", ".join(f"'{h}'" for h in HOLD_STATES)),
    _json_type("queue_cache", "object"),
    *(_timestamp_or_null(n) for n in ("ready_at", "due_at", "retry_at")),
])

# The whole of 3.1 for subject s in queue q, where t is s's template.
#
# Planner note: the JSON tests against the queue's lists (? on eligible_states, template
# codes, scopes) have no statistics; PostgreSQL guesses 1 % for each, multiplies the guesses
# and expects one visible row where there are thousands, then sorts instead of walking
# bloomops_subject_queue_order and probes lineage row by row where hashing is cheaper. Tested
# inside one CASE they count as a single 50 % guess. The conditions are the same; only the
# estimate changes. next_queue_key stays a plain equality (index and hash-join key) and the
# lineage exclusions stay NOT EXISTS (anti-joins).
def visibility(*, leased: str, held: str) -> str:
    """The predicate of 3.1, given how to test "has an active lease" and "has an active
    hold" through lineage (per row, or against sets computed once: see below)."""
    return f"""(
    {ENV}->>'next_queue_key' = q.queue_key
    AND CASE WHEN q.eligible_states ? ({ENV}->>'state')
              AND NOT {TERMINAL}
              AND NOT {CANCEL_REQUESTED}
              AND coalesce({ENV}->>'hold_state', 'NONE') <> 'ACTIVE'
              AND {READY_TS} <= %(now)s
              AND {ENVELOPE_VALID}
              AND q.template_codes ? {TEMPLATE_CODE}
              AND {SCOPE_MATCH}
             THEN true ELSE false END
    AND NOT {leased}
    AND NOT {held})"""


# Per-row form: NOT EXISTS probes through lineage. Best when a read stops early (a page or a
# claim walking bloomops_subject_queue_order).
VISIBLE = visibility(leased=ACTIVE_LEASE_EXISTS, held=ACTIVE_HOLD_EXISTS)

# Set form for reads over whole queues (depth, totals, summaries): the subjects with an
# active lease or an active hold are found once, from the small partial index of ACTIVE
# objects, and each subject is probed against them by hash. Same conditions as the
# EXISTS fragments above (LEASE_ACTIVE is shared).
BLOCKED_SUBJECTS = f"""
    leased_subjects AS MATERIALIZED (
        SELECT l.parent_instance_uid AS uid
        FROM generic_instance x
        JOIN generic_instance_lineage l ON l.child_instance_uid = x.uid AND NOT l.is_deleted
         AND l.relationship_type = 'execution_subject_lease'
        WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted AND {LEASE_ACTIVE}),
    held_subjects AS MATERIALIZED (
        SELECT l.parent_instance_uid AS uid
        FROM generic_instance x
        JOIN generic_instance_lineage l ON l.child_instance_uid = x.uid AND NOT l.is_deleted
         AND l.relationship_type = 'execution_subject_hold'
        WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted
          AND x.json_addl->'properties'->>'status' = 'ACTIVE')"""

VISIBLE_BY_SETS = visibility(
    leased="(s.uid IN (SELECT uid FROM leased_subjects))",
    held="(s.uid IN (SELECT uid FROM held_subjects))",
)

# After a claim has locked its candidate row: FOR UPDATE re-evaluated the candidate's own
# columns on the newest row version, but its lineage sub-queries ran on the statement's
# older snapshot (DESIGN.md "the claim trap"). This new statement re-reads the lineage.
LINEAGE_BLOCKED = f"""
    SELECT ({ACTIVE_LEASE_EXISTS}) AS leased, ({ACTIVE_HOLD_EXISTS}) AS held
    FROM generic_instance s WHERE s.uid = %(uid)s"""

# 3.4: priority desc, due_at asc nulls last, ready ts asc, created_dt asc, euid asc.
_ORDER_KEYS = (
    (f"coalesce(({ENV}->>'priority')::numeric, 0)", "DESC", "o_priority"),
    (f"{ENV}->>'due_at'", "ASC NULLS LAST", "o_due"),
    (READY_TS, "ASC", "o_ready"),
    ("s.created_dt", "ASC", "o_created"),
    ("s.euid", "ASC", "o_euid"),
)
# The same expressions as bloomops_subject_queue_order, so a read can walk that index.
ORDER_BY = ", ".join(f"{expr} {direction}" for expr, direction, _ in _ORDER_KEYS)
# The order keys as output columns of an inner query, and the same order over them outside.
ORDER_COLUMNS = ", ".join(f"{expr} AS {alias}" for expr, _, alias in _ORDER_KEYS)
ORDER_BY_COLUMNS = ", ".join(f"{alias} {direction}" for _, direction, alias in _ORDER_KEYS)

# Queue objects with the config fields the predicate reads as columns, computed once per
# queue: a subject row then compares against small values instead of extracting them from
# the queue's whole JSON again (OFFSET 0 keeps the sub-query from being folded away).
QUEUES = """
    SELECT q.uid, q.euid, q.tenant_id, q.json_addl, q.json_addl->'properties' AS config,
           q.json_addl->'properties'->>'queue_key' AS queue_key,
           coalesce(q.json_addl->'properties'->'eligible_states', '[]') AS eligible_states,
           coalesce(q.json_addl->'properties'->'subject_template_codes', '[]')
               AS template_codes,
           coalesce(q.json_addl->'properties'->'site_scope', '[]') AS site_scope,
           coalesce(q.json_addl->'properties'->'platform_scope', '[]') AS platform_scope,
           coalesce(q.json_addl->'properties'->'assay_scope', '[]') AS assay_scope
    FROM generic_instance q
    WHERE q.tenant_id = %(tenant)s AND NOT q.is_deleted
      AND q.type = 'execution' AND q.subtype = 'queue'
    OFFSET 0"""
