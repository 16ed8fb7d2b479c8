"""The full SQL statements of the write path, named, composed from the fragments of
``sql.py`` (reads keep their one statement beside their selector). Parameters are named;
``%(now)s`` is fixed-width UTC text (``envelope.ts``)."""

from __future__ import annotations

from bloomops.execution.sql import (
    ACTIVE_HOLD_EXISTS,
    ACTIVE_LEASE_EXISTS,
    ACTIVE_LEASE_FOUND,
    ENV,
    HAS_ENVELOPE,
    ORDER_BY,
    ORDER_BY_COLUMNS,
    ORDER_COLUMNS,
    OWN_COLUMNS_VISIBLE,
    QP,
    QUEUES,
    SCOPE_FIELDS,
    TEMPLATES,
    lease_past_expiry,
    worker_active_leases,
)
from bloomops.tapdb.tenancy import for_tenant

# After a claim has locked its candidate row: FOR UPDATE re-evaluated the candidate's own
# columns on the newest row version, but its lineage sub-queries ran on the statement's
# older snapshot (RULES.md#claims). This new statement re-reads the lineage.
LINEAGE_BLOCKED = f"""
    SELECT ({ACTIVE_LEASE_EXISTS}) AS leased, ({ACTIVE_HOLD_EXISTS}) AS held
    FROM generic_instance s WHERE s.uid = %(uid)s"""

# The claiming worker's own scopes over the subject (RULES.md#claims): each a text[] of the
# values it works (NULL: any), as policy.worker_scope_problem reads them.
IN_WORKER_SCOPE = " AND ".join(
    f"(%({f}s)s::text[] IS NULL OR coalesce(s.json_addl->'properties'->>'{f}', '')"
    f" = ANY(%({f}s)s::text[]))" for f in SCOPE_FIELDS)

def _claim_walk(in_scope: str) -> str:
    """The visible subjects of a queue in order (RULES.md#order), walked lazily: lineage is
    probed first, row by row along bloomops_routed_order (the queue's head is often crowded
    with subjects already leased), then the queue's conditions on the envelope; ``in_scope``:
    the worker's own scopes, or "true" for a worker of any scope (the scope test in the
    walk's generic plan made every claimer's plan worse: 8-way claims 94 against 130 a
    second, so a worker of any scope walks without it)."""
    return f"""
    SELECT s.uid FROM (
        SELECT s.uid, s.template_uid, s.json_addl, s.created_dt, {ORDER_COLUMNS}
        FROM generic_instance s
        WHERE s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
          AND {ENV}->>'next_queue_key' = %(queue_key)s
          AND NOT {ACTIVE_LEASE_FOUND} AND NOT {ACTIVE_HOLD_EXISTS} AND {in_scope}
        ORDER BY {ORDER_BY}) s
    JOIN ({QUEUES}) q ON {QP}->>'queue_key' = %(queue_key)s
    JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
    WHERE {OWN_COLUMNS_VISIBLE}
    ORDER BY {ORDER_BY_COLUMNS}"""

# One candidate locked, skipping it when another claimer holds it, its own columns evaluated
# again on its newest version (as a row lock does).
_CLAIM_LOCK = f"""
    SELECT s.uid INTO v_locked FROM generic_instance s
    JOIN ({QUEUES}) q ON {QP}->>'queue_key' = %(queue_key)s
    JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
    WHERE s.uid = %(uid)s AND s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
      AND {OWN_COLUMNS_VISIBLE} AND {IN_WORKER_SCOPE}
    FOR NO KEY UPDATE OF s SKIP LOCKED"""


def _in_function(sql: str, *, tenant: str | None = "= p_tenant") -> str:
    """A statement's named parameters as the claim function's arguments and variables;
    ``tenant`` is how the tenant is compared, None for the statement of no tenant as
    db.fetch_all runs it (tenancy.for_tenant: ``IS NULL``, which keeps the index)."""
    sql = (for_tenant(sql, {"tenant": None}) if tenant is None
           else sql.replace("= %(tenant)s", tenant))
    for name, var in (("queue_key", "p_queue_key"), ("now", "p_now"), ("uid", "v_uid"),
                      *((f"{f}s", f"p_{f}s") for f in SCOPE_FIELDS)):
        sql = sql.replace(f"%({name})s", var)
    assert "%(" not in sql, sql
    return sql


# The claim's choice of subject (RULES.md#claims), in the database: one cursor walks the
# queue in order, and each candidate is locked (SKIP LOCKED) and its lineage re-read in new
# statements, which in a VOLATILE function under READ COMMITTED see new snapshots: the walk's
# lineage probes saw the snapshot the walk started with, and a claimer that committed since
# may have leased the candidate. When that happened the walk goes on from where it was,
# instead of starting again at the head past every leased subject (a busy queue's claimers
# meet this race about every other claim). A candidate found blocked after its lock counts
# towards p_max_blocked; then the claim gives up (NO_WORK). The cursor is FETCHed one row at
# a time, so a claim at an uncrowded head computes one candidate.
CLAIM_FUNCTION = "bloomops_claim_in_scope"
CLAIM_FUNCTION_DDL = f"""
    CREATE OR REPLACE FUNCTION {CLAIM_FUNCTION}(p_tenant uuid, p_queue_key text, p_now text,
                                                p_max_blocked integer, p_sites text[],
                                                p_platforms text[], p_assays text[])
    RETURNS bigint LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
    -- Its statements run on their generic plans: the same for every queue and instant, and
    -- planned once per session instead of on every claim (several ms, more than the walk).
    DECLARE
      walk refcursor;
      v_uid bigint;
      v_locked bigint;
      v_blocked boolean;
      v_tries integer := 0;
    BEGIN
      IF p_sites IS NULL AND p_platforms IS NULL AND p_assays IS NULL THEN
        IF p_tenant IS NULL THEN
          OPEN walk NO SCROLL FOR {_in_function(_claim_walk("true"), tenant=None)};
        ELSE
          OPEN walk NO SCROLL FOR {_in_function(_claim_walk("true"))};
        END IF;
      ELSIF p_tenant IS NULL THEN
        OPEN walk NO SCROLL FOR {_in_function(_claim_walk(IN_WORKER_SCOPE), tenant=None)};
      ELSE
        OPEN walk NO SCROLL FOR {_in_function(_claim_walk(IN_WORKER_SCOPE))};
      END IF;
      LOOP
        FETCH walk INTO v_uid;
        EXIT WHEN NOT FOUND;
        {_in_function(_CLAIM_LOCK, tenant="IS NOT DISTINCT FROM p_tenant")};
        CONTINUE WHEN NOT FOUND;
        SELECT b.leased OR b.held INTO v_blocked FROM ({_in_function(LINEAGE_BLOCKED)}) b;
        IF NOT v_blocked THEN
          CLOSE walk;
          RETURN v_uid;
        END IF;
        v_tries := v_tries + 1;
        EXIT WHEN v_tries >= p_max_blocked;
      END LOOP;
      CLOSE walk;
      RETURN NULL;
    END $$"""

CLAIM_CANDIDATE = (f"SELECT {CLAIM_FUNCTION}(%(tenant)s, %(queue_key)s, %(now)s,"
                   " %(max_blocked)s, %(sites)s::text[], %(platforms)s::text[],"
                   " %(assays)s::text[]) AS uid")

WORKER_ACTIVE_LEASE_COUNT = (
    f"SELECT {worker_active_leases('%(worker_uid)s', '%(worker_euid)s')} AS n")

# Leases the sweeper marks EXPIRED (RULES.md#leases), locked, skipping any in use.
# Each with its subject (through lineage), in the one statement.
LEASES_PAST_EXPIRY = f"""
    SELECT x.uid, x.euid, x.name, x.template_uid, x.type, x.subtype, x.json_addl,
           x.created_dt,
           ls.uid AS subject_uid, ls.euid AS subject_euid
    FROM generic_instance x
    LEFT JOIN LATERAL (
        SELECT s.uid, s.euid FROM generic_instance_lineage l
        JOIN generic_instance s ON s.uid = l.parent_instance_uid
             AND s.tenant_id = %(tenant)s
        WHERE l.child_instance_uid = x.uid AND NOT l.is_deleted
          AND l.relationship_type = 'execution_subject_lease'
        ORDER BY l.uid LIMIT 1) ls ON true
    WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted AND x.type = 'execution'
      AND x.subtype = 'queue_lease' AND {lease_past_expiry()}
    ORDER BY x.uid FOR NO KEY UPDATE OF x SKIP LOCKED"""

# An earlier action record of the same request (RULES.md#idempotency): the caller's, or
# written when the scope also named a target ("caller|target"; no username holds a "|").
# Not LIKE: "_" is a wildcard there and a username character, so a_b matched axb's records.
FIND_REPLAY = """
    SELECT euid, json_addl FROM generic_instance
    WHERE tenant_id = %(tenant)s AND NOT is_deleted AND type = 'execution_queue'
      AND subtype = %(action)s AND json_addl->>'idempotency_key' = %(key)s
      AND (json_addl->>'idempotency_scope' = %(scope)s
           OR starts_with(json_addl->>'idempotency_scope', %(legacy)s))
    ORDER BY uid LIMIT 1"""

# The delivery row of an event message (TapDB's outbox), in the action's transaction.
OUTBOX_INSERT = """
    INSERT INTO outbox_event (message_uid, tenant_id, destination, dedupe_key)
    VALUES (%(message_uid)s, %(tenant)s, %(destination)s, %(dedupe_key)s)"""
