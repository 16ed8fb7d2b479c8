"""A queue's routed subjects as plain values, with the visibility rule over them
(RULES.md#visibility): what the summaries, the depths and the queue page's total count.

Per queue, a LATERAL walk of the queue's routed subjects through bloomops_routed_order (whose
predicate already holds the envelope's validity, so it is not evaluated again per row), one
range of it per priority class. Each
layer is kept apart by OFFSET 0 so that what it computes is computed once per row and passed
on as a plain value: the properties are taken out of the whole JSON once, the envelope out of
them once, its fields once; then the rules of sql.py (the same fragments every read uses) run
over those values, and bloomops_utc only over the two stored timestamps a row is ordered by.
A queue's template codes become the uids of its templates once per queue
(template_uid = ANY(...)) instead of a join per subject. The lease and hold sets are
BLOCKED_SUBJECTS, found once per statement.
"""

from __future__ import annotations

from bloomops.execution.sql import (
    BLOCKED_SUBJECTS,
    CANCEL_REQUESTED,
    ENV,
    HAS_ENVELOPE,
    HELD_BY_ENVELOPE,
    HELD_IN_SET,
    LEASED_BY_SETS,
    PRIORITY,
    QUEUES,
    SCOPE_FIELDS,
    TEMPLATES,
    TERMINAL_FLAG,
    held,
    on_envelope,
    priority_band,
    ready_parts,
    retry_pending,
    scope_match,
    terminal,
    visibility,
)
from bloomops.execution.states import PRIORITY_CLASSES


def stated_ready(*, retry_at: str, ready_at: str) -> str:
    """The part of sql.ready_ts the envelope names (NULL when it names none: then the subject
    is ready from its created_dt), over texts a read has already taken out."""
    return f"coalesce({', '.join(ready_parts('s', retry_at, ready_at))})"


# The stated instant compared and ordered bytewise: our fixed-width UTC text orders as the
# instants do, and the database's collation (C.UTF-8 through libc) would call strcoll for
# every comparison.
STATED = 's.stated COLLATE "C"'


def ready_due(stated: str, created: str) -> str:
    """``ready_ts <= %(now)s`` over a read's plain values without writing created_dt out as
    text for every row: fixed-width UTC text orders as the instants do, so where the
    envelope names no instant, created_dt compared with %(now)s as a timestamptz is the same
    test (tests/test_summaries_formulation.py compares the two)."""
    return f"coalesce({stated} <= %(now)s, {created} <= %(now)s::timestamptz)"


# The WITH list a statement over ``queues q`` and ``plain_subjects()`` starts with. The
# queues are computed once (OFFSET 0) but not materialized: a stored row's small values would
# be copied out of it again for every subject's test.
QUEUES_AND_SETS = f"""{BLOCKED_SUBJECTS},
    queues AS NOT MATERIALIZED (
        SELECT q.*, ARRAY(SELECT t.uid FROM ({TEMPLATES}) t
                          WHERE q.template_codes ? t.code) AS template_uids
        FROM ({QUEUES}) q
        OFFSET 0)"""

# The rule over a stored row ``s`` against the sets of QUEUES_AND_SETS: for a read that has
# the sets anyway (the queue page, which counts its total from them) and walks rows whole.
VISIBLE_IN_SETS = visibility(leased=LEASED_BY_SETS, held=HELD_IN_SET)

# The parts of the rules over the plain values the inner layers pass on.
STATED_PLAIN = stated_ready(retry_at="s.retry_at", ready_at="s.ready_at")
TERMINAL_PLAIN = terminal(flag="s.terminal_flag", state="s.state")
# Held (RULES.md#holds) once per row, for the held count and for visibility alike.
HELD_PLAIN = f"(NOT s.terminal AND {held(HELD_IN_SET, 's.held_by_envelope')})"
VISIBLE_PLAIN = visibility(
    leased=LEASED_BY_SETS, held="s.held", routed="true", state="s.state",
    terminal="s.terminal", cancel_requested="s.cancel_requested",
    held_by_envelope="s.held_by_envelope",
    ready_due=ready_due(STATED, "s.created_dt"),
    template_listed="s.placed", scope="true")
RETRY_PENDING_PLAIN = retry_pending(state="s.state", terminal="s.terminal",
                                    retry_at="s.retry_at")
# The template listed and the scopes, decided where the properties are at hand: a subject's
# site/platform/assay is read only for a queue scoped by it.
_PLACED = "(s.template_listed AND {scope})".format(
    scope=scope_match({f: f"s.props->>'{f}'" for f in SCOPE_FIELDS}))


# RULES.md#order's priority classes as ranges of bloomops_routed_order's priority key, and
# what lies below the lowest class: a queue's subjects are read by one range scan per class,
# each row tagged with its class's lowest priority (a number: cheaper to compare than a
# name), so no row's priority is taken out of its JSON.
_PRIORITY_BANDS = (*((str(floor), priority_band(c)) for c, floor in PRIORITY_CLASSES.items()),
                   ("NULL::int", f"({PRIORITY} < {min(PRIORITY_CLASSES.values())})"))


def _routed_rows(extra: str) -> str:
    """Queue ``q``'s routed subjects as stored rows, each tagged with its priority class
    (``priority_floor``)."""
    return "\n                        UNION ALL".join(f"""
                        SELECT s.uid, s.created_dt, {band} AS priority_floor,
                               s.template_uid = ANY(q.template_uids) AS template_listed,
                               s.json_addl->'properties' AS props
                        FROM generic_instance s
                        WHERE s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
                          AND {ENV}->>'next_queue_key' = q.queue_key AND {cond}{extra}"""
        for band, cond in _PRIORITY_BANDS)


def plain_subjects(extra: str = "") -> str:
    """A sub-select over queue ``q`` (a row of ``queues``): its routed subjects with stated
    (the instant the envelope names, or NULL; compare it as STATED), created_dt,
    priority_floor (the lowest priority of its class, RULES.md#order; NULL below the lowest),
    held (RULES.md#holds: not terminal, held by envelope or lineage), retry_pending
    (RULES.md#retries) and vis (visible in q now). ``extra``: more conditions on the stored
    row ``s`` (the queue page's filters). Each layer passes on only what the next one uses."""
    return f"""
            SELECT s.stated, s.created_dt, s.priority_floor, s.held,
                   {RETRY_PENDING_PLAIN} AS retry_pending, {VISIBLE_PLAIN} AS vis
            FROM (
            SELECT s.*, {HELD_PLAIN} AS held
            FROM (
            SELECT s.uid, s.created_dt, s.placed, s.priority_floor, s.state, s.retry_at,
                   s.cancel_requested, s.held_by_envelope, {TERMINAL_PLAIN} AS terminal,
                   {STATED_PLAIN} AS stated
            FROM (
                SELECT s.uid, s.created_dt, s.placed, s.priority_floor,
                       s.env->>'state' AS state,
                       {on_envelope(TERMINAL_FLAG, "s.env")} AS terminal_flag,
                       {on_envelope(CANCEL_REQUESTED, "s.env")} AS cancel_requested,
                       {on_envelope(HELD_BY_ENVELOPE, "s.env")} AS held_by_envelope,
                       s.env->>'retry_at' AS retry_at, s.env->>'ready_at' AS ready_at
                FROM (
                    SELECT s.uid, s.created_dt, s.priority_floor, {_PLACED} AS placed,
                           s.props->'execution' AS env
                    FROM ({_routed_rows(extra)}
                        OFFSET 0) s
                    OFFSET 0) s
                OFFSET 0) s
            OFFSET 0) s
            OFFSET 0) s
            OFFSET 0"""
