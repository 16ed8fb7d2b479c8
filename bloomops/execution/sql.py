"""SQL fragments of the queue visibility predicate (RULES.md#visibility) and order
(RULES.md#order). Every selector that decides "is this subject in that queue" composes these
fragments, so the predicate has one definition. ``s`` is the subject row, ``q`` a queue row;
parameters are ``%(tenant)s`` and ``%(now)s`` (fixed-width UTC text, envelope.ts)."""

from __future__ import annotations

from bloomops.execution import states
from bloomops.execution.envelope import HOLD_STATES
from bloomops.execution.states import ALL_STATES, ELIGIBLE_STATES, PRIORITY_CLASSES, TERMINAL_STATES

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


def utc(text_expr: str) -> str:
    """A timestamp another writer may have stored in any ISO 8601 form (``Z``, ``+00:00``,
    another offset, with or without a fraction) as our fixed-width UTC text, so comparing
    and ordering as text is right (RULES.md#envelope). Our own form passes through without
    parsing; an unreadable value is NULL. The function is made by bootstrap
    (``indexes.FUNCTIONS``); PostgreSQL inlines it, so indexes can hold it."""
    return f"bloomops_utc({text_expr})"


def ready_parts(alias: str, retry_at: str | None, ready_at: str | None) -> tuple[str, str]:
    """retry_at and ready_at as our UTC text, from the stored envelope or from texts a read
    has already taken out of it."""
    env = f"({alias}.json_addl->'properties'->'execution')" if alias else (
        "(json_addl->'properties'->'execution')")
    return utc(retry_at or f"{env}->>'retry_at'"), utc(ready_at or f"{env}->>'ready_at'")


def ready_ts(alias: str = "s") -> str:
    """coalesce(retry_at, ready_at, created_dt): the instant a subject becomes claimable."""
    created = f"{alias}.created_dt" if alias else "created_dt"
    return f"coalesce({', '.join(ready_parts(alias, None, None))}, {utc_text(created)})"


READY_TS = ready_ts()

# A live subject routed to a queue, whatever its envelope holds (the hidden-items list and
# the filter menus read these). Unlike "? 'execution'" the planner can estimate it.
ROUTED = f"NOT s.is_deleted AND {ENV}->>'next_queue_key' IS NOT NULL"

def _status(alias: str) -> str:
    return f"{alias}.json_addl->'properties'->>'status'"


def expires_utc(alias: str) -> str:
    return utc(f"{alias}.json_addl->'properties'->>'expires_at'")


def lease_active(alias: str = "x") -> str:
    """RULES.md#leases 5.1: a lease is active when ACTIVE and unexpired at %(now)s."""
    return (f"{_status(alias)} = 'ACTIVE'"
            f" AND {expires_utc(alias)} > %(now)s")


def lease_past_expiry(alias: str = "x") -> str:
    """Stored ACTIVE but past its expiry: what the sweeper marks EXPIRED."""
    return (f"{_status(alias)} = 'ACTIVE'"
            f" AND {expires_utc(alias)} <= %(now)s")


def lease_expired(alias: str = "x") -> str:
    """Marked EXPIRED by the sweeper, or ACTIVE past its expiry and not swept yet."""
    return f"({_status(alias)} = 'EXPIRED' OR ({lease_past_expiry(alias)}))"


def lease_effective_status(alias: str = "x") -> str:
    """The status every read reports: EXPIRED for an ACTIVE lease past its expiry."""
    return (f"CASE WHEN {lease_expired(alias)} THEN 'EXPIRED' ELSE {_status(alias)} END")


def hold_active(alias: str = "x") -> str:
    return f"{_status(alias)} = 'ACTIVE'"


LEASE_ACTIVE = lease_active()


def leases_found(lookup: str, value: str, *, rel: str, linked_to: str) -> str:
    """The active leases whose copied ``lookup`` field (worker_lookup_euid,
    subject_lookup_euid) is ``value``, each kept only when a ``rel`` lineage edge links it to
    ``linked_to`` (a uid expression): the copy finds, lineage decides (RULES.md#leases). A
    FROM clause over lease ``x``. The copies are found in partial indexes of ACTIVE leases, so
    only live leases are read, however many ended before; OFFSET 0 keeps the lineage test a
    probe per lease found (as a semi-join the planner may instead walk every edge of
    ``linked_to``, which is the history these reads must not read)."""
    return f"""generic_instance x
        WHERE x.json_addl->'properties'->>'{lookup}' = {value}
          AND NOT x.is_deleted AND x.type = 'execution' AND x.subtype = 'queue_lease'
          AND {lease_active()}
          AND EXISTS (SELECT 1 FROM generic_instance_lineage l
                      WHERE l.child_instance_uid = x.uid AND NOT l.is_deleted
                        AND l.relationship_type = '{rel}'
                        AND l.parent_instance_uid = {linked_to} OFFSET 0)"""


def worker_active_leases(worker_uid: str, worker_euid: str) -> str:
    """How many active leases a worker holds (its lease limit counts these), as a scalar
    sub-query on the worker's uid and EUID expressions, through bloomops_lease_worker_active."""
    found = leases_found("worker_lookup_euid", worker_euid, rel="execution_worker_lease",
                         linked_to=worker_uid)
    return f"(SELECT count(*) FROM {found})"

# A subject's lease edges newest first (the sub-query's ORDER BY keeps it from being folded
# into the join): a subject claimed many times has its active lease, if any, at the end of
# the edges, so the probe finds it first instead of reading every lease that ended before.
ACTIVE_LEASE_EXISTS = f"""EXISTS (
    SELECT 1 FROM (
        SELECT l.child_instance_uid FROM generic_instance_lineage l
        WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
          AND l.relationship_type = 'execution_subject_lease'
        ORDER BY l.child_instance_uid DESC) l
    JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
    WHERE {LEASE_ACTIVE})"""

# The same test as the claim's walk makes it, row by row along a head crowded with leased
# subjects: the active leases whose copied subject_lookup_euid names the subject are found in
# bloomops_lease_active_subject (ACTIVE leases only), and each counts when lineage links it to
# the subject (the copy finds, lineage decides: RULES.md#claims). A lease linked by lineage
# whose copy names another subject is missed here, and found by the re-read of the subject's
# lineage the claim makes after locking it (statements.LINEAGE_BLOCKED), so this form may
# only ever offer a candidate, never decide. OFFSET 0 keeps the test a probe per row.
ACTIVE_LEASE_FOUND = (
    f"""EXISTS (SELECT 1 FROM {leases_found("subject_lookup_euid", "s.euid",
                                           rel="execution_subject_lease", linked_to="s.uid")}
    OFFSET 0)""")

# The subject's hold edges are a sub-select of FROM (the outer reference inside it, as in
# ACTIVE_LEASE_EXISTS), where PostgreSQL does not turn an EXISTS into a join, so the test
# stays a probe per row: written as a plain join, the planner may turn it into an anti-join
# against every active hold of the lab, built first (it expects a few dozen; the bench has
# 7,800) and scanned again for each row of a page.
ACTIVE_HOLD_EXISTS = f"""EXISTS (
    SELECT 1 FROM (
        SELECT l.child_instance_uid FROM generic_instance_lineage l
        WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
          AND l.relationship_type = 'execution_subject_hold') l
    JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
    WHERE {hold_active()})"""

# Templates with their semantic code.
TEMPLATES = """
    SELECT t.uid, (coalesce(t.json_addl->>'semantic_category', t.category) || '/' || t.type
                   || '/' || t.subtype || '/' || t.version) AS code
    FROM generic_template t"""

# Template membership: the subject's semantic template code is listed by the queue.
TEMPLATE_CODE = "t.code"


SCOPE_FIELDS = ("site", "platform", "assay")


def _scope(field: str, value: str | None = None) -> str:
    scope = f"q.{field}_scope"
    value = value or f"s.json_addl->'properties'->>'{field}'"
    return f"(NOT q.{field}_scoped OR {scope} ? coalesce({value}, ''))"


def scope_match(values: dict[str, str] | None = None) -> str:
    """The subject's site/platform/assay within the queue's scopes (an empty scope is any);
    ``values``: the property texts when a read has already taken them out."""
    return " AND ".join(_scope(f, (values or {}).get(f)) for f in SCOPE_FIELDS)


SCOPE_MATCH = scope_match()


def env_flag(name: str) -> str:
    """An envelope flag, true only for JSON true: a cast (``::boolean``) would make one bad
    row written by anyone fail the whole statement. Compared as text, with the type asked
    only where the text is 'true' (the string "true" is not the flag): a jsonb equality
    builds and walks both values, about 0.2 us a row, a tenth of the summaries' rules."""
    return (f"coalesce({ENV}->>'{name}' = 'true'"
            f" AND jsonb_typeof({ENV}->'{name}') = 'boolean', false)")


def on_envelope(fragment: str, envelope: str) -> str:
    """A fragment written over the stored envelope (``ENV``), over an envelope a read has
    already taken out of the row once (a column): the same rule, without extracting the
    envelope from the whole JSON again for every field it reads."""
    return fragment.replace(ENV, envelope)


HELD_BY_ENVELOPE = f"coalesce({ENV}->>'hold_state', 'NONE') = 'ACTIVE'"
TERMINAL_FLAG = env_flag("terminal")


def state_in(values, state: str = f"({ENV}->>'state')") -> str:
    """``state`` is one of ``values`` (texts of our own vocabulary, never a caller's)."""
    return f"{state} IN ({', '.join(repr(str(v)) for v in values)})"


def terminal(flag: str = TERMINAL_FLAG, state: str = f"({ENV}->>'state')") -> str:
    """RULES.md#envelope: terminal by its flag or by its state, whichever a writer set."""
    return f"({flag} OR {state_in(sorted(TERMINAL_STATES), state)})"


TERMINAL = terminal()
# RULES.md#reconciliation: its work is under way outside (the workbench's list, its index).
OUTSIDE_WORK = state_in(states.OUTSIDE_STATES)
# RULES.md#retries: waiting for its retry window, and the metric "retry pending".
def retry_waiting(retry_at: str = f"{ENV}->>'retry_at'") -> str:
    return f"coalesce({utc(retry_at)} > %(now)s, false)"


def retry_pending(*, state: str = f"{ENV}->>'state'", terminal: str = TERMINAL,
                  retry_at: str = f"{ENV}->>'retry_at'") -> str:
    """RULES.md#retries, over the envelope or over values a read has taken out of it."""
    return (f"({state} = 'FAILED_RETRYABLE' AND NOT {terminal}"
            f" AND {retry_waiting(retry_at)})")


RETRY_WAITING = retry_waiting()
RETRY_PENDING = retry_pending()
# The subject's revision, or NULL when a writer stored something else (never a failed cast).
SUBJECT_REVISION = (f"CASE WHEN ({ENV}->>'revision') ~ '^[0-9]{{1,18}}$'"
                    f" THEN ({ENV}->>'revision')::bigint END")
# A queue's dispatch priority (order across queues, RULES.md#order), 0 when it is not a number.
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


_ENVELOPE_CHECKS = " AND ".join([
    f"jsonb_typeof({ENV}) = 'object'",
    state_in(ALL_STATES),
    _whole_or_null("revision"), _whole_or_null("attempt_count"),
    _whole_or_null("max_attempts_override", "^[1-9][0-9]*$"),
    _json_type("priority", "number"),
    *(_json_type(n, "string") for n in ("next_queue_key", "next_action_key", "hold_reason",
                                         "last_execution_record_euid")),
    _json_type("terminal", "boolean"), _json_type("cancel_requested", "boolean"),
    state_in(HOLD_STATES, f"coalesce({ENV}->>'hold_state', 'NONE')"),
    _json_type("queue_cache", "object"),
    *(_timestamp_or_null(n) for n in ("ready_at", "due_at", "retry_at")),
])
# One boolean expression, not a list of conditions: as a list PostgreSQL would multiply a
# guess for each check and expect one routed subject where there are thousands (and sort
# instead of walking the order index); as one expression it has statistics of its own
# (indexes.py, bloomops_envelope_valid_stats).
ENVELOPE_VALID = f"(CASE WHEN {_ENVELOPE_CHECKS} THEN true ELSE false END)"

# A routed subject whose envelope the engine can read: the rows every queue read and claim
# starts from. It is also the predicate of the partial index bloomops_routed_order, so a
# read walking that index never evaluates the validity checks per row (PostgreSQL drops a
# condition the index predicate implies); they are paid once, when a row is written.
HAS_ENVELOPE = f"{ROUTED} AND {ENVELOPE_VALID}"

# The whole visibility rule (RULES.md#visibility) for subject s in queue q. Why one CASE: the
# JSON tests against the queue's lists have no statistics, and PostgreSQL multiplied its 1 %
# guesses into one visible row where there are thousands (so it sorted instead of walking
# bloomops_routed_order, probed lineage per row); inside one CASE they are one 50 % guess.
def visibility(*, leased: str, held: str, routed: str = f"{ENV}->>'next_queue_key' = q.queue_key",
               state: str = f"{ENV}->>'state'", terminal: str = TERMINAL,
               cancel_requested: str = CANCEL_REQUESTED,
               held_by_envelope: str = HELD_BY_ENVELOPE,
               ready_due: str = f"{READY_TS} <= %(now)s",
               template_listed: str = f"q.template_codes ? {TEMPLATE_CODE}",
               scope: str = SCOPE_MATCH) -> str:
    """The visibility predicate, given how to test "has an active lease" and "has an active
    hold" through lineage (per row, or against sets computed once: see below). Used with
    HAS_ENVELOPE (or ENVELOPE_VALID where a read starts from ROUTED): the envelope's
    validity is checked there, once per row written, not here per read.

    The other arguments are the parts of the rule over the stored row, which is what every
    read passes; a read over whole queues (the summaries) passes the same parts over values
    it has already taken out of the envelope once per row (``selectors/routed.py``)."""
    return f"""(
    {routed}
    AND CASE WHEN q.eligible_states ? ({state})
              AND NOT {terminal}
              AND NOT {cancel_requested}
              AND NOT {held_by_envelope}
              AND {ready_due}
              AND {template_listed}
              AND {scope}
             THEN true ELSE false END
    AND NOT {leased}
    AND NOT {held})"""


def held(by_lineage: str, by_envelope: str = HELD_BY_ENVELOPE) -> str:
    """RULES.md#holds: held by the envelope's hold_state or by an ACTIVE hold in lineage
    (the two agree when only the engine writes; either one keeps the subject out)."""
    return f"({by_envelope} OR {by_lineage})"


HELD = held(ACTIVE_HOLD_EXISTS)
HELD_IN_SET = "(s.uid IN (SELECT uid FROM held_subjects))"
LEASED_BY_SETS = "(s.uid IN (SELECT uid FROM leased_subjects))"


# Per-row form: NOT EXISTS probes through lineage. Best when a read stops early without the
# sets below (a claim walking bloomops_routed_order; one subject's diagnostics).
VISIBLE = visibility(leased=ACTIVE_LEASE_EXISTS, held=ACTIVE_HOLD_EXISTS)

# Set form for reads over whole queues (depth, totals, summaries): the subjects with an
# active lease or an active hold are found once, from the small partial index of ACTIVE
# objects, and each subject is probed against them by hash. Same conditions as the EXISTS
# fragments above (LEASE_ACTIVE is shared), and like them whatever tenant the lease or hold
# carries: lineage decides, so another writer's lease blocks a claim here too. The active
# leases themselves (active_leases) are kept for the summaries' leased count of the tenant.
# Each active lease's edge a probe (LATERAL): a join may hash every lease edge ever written.
BLOCKED_SUBJECTS = f"""
    active_leases AS MATERIALIZED (
        SELECT x.uid, x.tenant_id, x.type, x.subtype,
               x.json_addl->'properties'->>'queue_lookup_key' AS queue_key
        FROM generic_instance x
        WHERE NOT x.is_deleted AND {LEASE_ACTIVE}),
    leased_subjects AS MATERIALIZED (
        SELECT l.uid FROM active_leases x CROSS JOIN LATERAL (
            SELECT l.parent_instance_uid AS uid FROM generic_instance_lineage l
            WHERE l.child_instance_uid = x.uid AND NOT l.is_deleted
              AND l.relationship_type = 'execution_subject_lease'
            OFFSET 0) l),
    held_subjects AS MATERIALIZED (
        SELECT l.parent_instance_uid AS uid
        FROM generic_instance x
        JOIN generic_instance_lineage l ON l.child_instance_uid = x.uid AND NOT l.is_deleted
         AND l.relationship_type = 'execution_subject_hold'
        WHERE NOT x.is_deleted AND {hold_active()})"""

# The conditions on the subject row's own columns only (a claim re-reads lineage after
# locking, in a statement of its own: statements.LINEAGE_BLOCKED).
OWN_COLUMNS_VISIBLE = visibility(leased="false", held="false")


# Queue order: priority desc, due_at asc nulls last, ready ts asc, created_dt asc, euid asc.
# Priority as a number (RULES.md#order), 0 when the envelope holds none or (another writer's)
# something else: the order index holds valid envelopes only, but a read of other rows (the
# hidden items), or a plan that filters rows before testing validity, meets any value.
PRIORITY = (f"coalesce(CASE WHEN jsonb_typeof({ENV}->'priority') = 'number'"
            f" THEN ({ENV}->>'priority')::numeric END, 0)")


def priority_band(cls: str, expr: str = PRIORITY) -> str:
    """RULES.md#order: the named class a numeric priority falls in, as a condition."""
    floor = PRIORITY_CLASSES[cls]
    above = sorted(v for v in PRIORITY_CLASSES.values() if v > floor)
    return f"({expr} >= {floor}" + (f" AND {expr} < {above[0]})" if above else ")")


ORDER_KEYS = (
    (PRIORITY, "DESC", "o_priority"),
    (utc(f"{ENV}->>'due_at'"), "ASC NULLS LAST", "o_due"),
    (READY_TS, "ASC", "o_ready"),
    ("s.created_dt", "ASC", "o_created"),
    ("s.euid", "ASC", "o_euid"),
)
# The same expressions as bloomops_routed_order, so a read can walk that index.
ORDER_BY = ", ".join(f"{expr} {direction}" for expr, direction, _ in ORDER_KEYS)
# The order keys as output columns of an inner query, and the same order over them outside.
ORDER_COLUMNS = ", ".join(f"{expr} AS {alias}" for expr, _, alias in ORDER_KEYS)
ORDER_BY_COLUMNS = ", ".join(f"{alias} {direction}" for _, direction, alias in ORDER_KEYS)


def _scope_value(field: str) -> str:
    """A queue's scope: JSON null is no scope, as absent is. Nothing another writer stores
    there fails a read (a text is one value, anything else matches nothing)."""
    return f"coalesce(nullif(q.json_addl->'properties'->'{field}_scope', 'null'), '[]')"


# Queue objects with the config fields the predicate reads as columns, once per queue (OFFSET
# 0 keeps it so): subjects compare against small values, an unscoped queue (``*_scoped``
# false) reads no scope field of its subjects. Its eligible states: the texts it stores that
# a queue may offer in (policy.offered_states; another writer's WAITING_EXTERNAL is not).
QUEUES = """
    SELECT q.uid, q.euid, q.tenant_id, q.json_addl, q.json_addl->'properties' AS config,
           q.json_addl->'properties'->>'queue_key' AS queue_key,
           coalesce(jsonb_path_query_array(CASE jsonb_typeof(q.json_addl->'properties'->
               'eligible_states') WHEN 'string' THEN jsonb_build_array(q.json_addl->'properties'
               ->'eligible_states') ELSE q.json_addl->'properties'->'eligible_states' END,
               'strict $[*] ? (@.type() == "string" && ({offered}))', '{{}}', true), '[]')
               AS eligible_states,
           coalesce(q.json_addl->'properties'->'subject_template_codes', '[]')
               AS template_codes,{scopes}
    FROM generic_instance q
    WHERE q.tenant_id = %(tenant)s AND NOT q.is_deleted
      AND q.type = 'execution' AND q.subtype = 'queue'
    OFFSET 0""".format(scopes=",".join(
    f"""
           {_scope_value(f)} AS {f}_scope, {_scope_value(f)} <> '[]' AS {f}_scoped"""
    for f in SCOPE_FIELDS), offered=" || ".join(f'@ == "{s}"' for s in ELIGIBLE_STATES))
