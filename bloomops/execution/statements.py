"""The full SQL statements of the write path, named, composed from the fragments of
``sql.py`` (reads keep their one statement beside their selector). Parameters are named;
``%(now)s`` is fixed-width UTC text (``envelope.ts``)."""

from __future__ import annotations

from bloomops.execution.sql import (
    ACTIVE_HOLD_EXISTS,
    ACTIVE_LEASE_EXISTS,
    ENV,
    HAS_ENVELOPE,
    ORDER_BY,
    ORDER_BY_COLUMNS,
    ORDER_COLUMNS,
    ORDER_KEYS,
    OWN_COLUMNS_VISIBLE,
    QP,
    QUEUES,
    TEMPLATES,
    VISIBLE,
    lease_past_expiry,
    worker_active_leases,
)

# The first visible subject of a queue in order, locked, skipping rows other claimers hold
# (RULES.md#claims); ``exclude`` are candidates this claim already found blocked.
CLAIM_CANDIDATE = f"""
    SELECT s.uid FROM ({QUEUES}) q
    JOIN generic_instance s ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
     AND {ENV}->>'next_queue_key' = %(queue_key)s
    JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
    WHERE {QP}->>'queue_key' = %(queue_key)s AND {VISIBLE}
      AND NOT (s.uid = ANY(%(exclude)s))
    ORDER BY {ORDER_BY}
    LIMIT 1
    FOR UPDATE OF s SKIP LOCKED"""

# The same claim in two steps, for a queue whose head is crowded with subjects already
# leased (a busy queue: each claim walks past all of them). The first CLAIM_AHEAD visible
# subjects are found in order without locking, so the walk of bloomops_queue_order needs no
# per-row re-check of the envelope's validity (PostgreSQL keeps the conditions an index
# predicate implies on a FOR UPDATE scan), and lineage is probed before the queue's
# conditions are evaluated on the envelope (among the first CLAIM_AHEAD * 16 subjects
# lineage does not block). Then they are locked in that order, skipping rows other
# claimers hold, with the row's own conditions evaluated again on its newest version as
# FOR UPDATE does. When none of them can be locked, the one-step statement decides.
CLAIM_AHEAD = 16
CLAIM_CANDIDATE_AHEAD = f"""
    SELECT s.uid FROM (
        SELECT s.uid, {", ".join(f"s.{alias}" for _, _, alias in ORDER_KEYS)}
        FROM (
            SELECT s.uid, s.template_uid, s.json_addl, s.created_dt, {ORDER_COLUMNS}
            FROM generic_instance s
            WHERE s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
              AND {ENV}->>'next_queue_key' = %(queue_key)s
              AND NOT {ACTIVE_LEASE_EXISTS} AND NOT {ACTIVE_HOLD_EXISTS}
              AND NOT (s.uid = ANY(%(exclude)s))
            ORDER BY {ORDER_BY}
            LIMIT {CLAIM_AHEAD * 16}) s
        JOIN ({QUEUES}) q ON {QP}->>'queue_key' = %(queue_key)s
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {OWN_COLUMNS_VISIBLE}
        ORDER BY {ORDER_BY_COLUMNS}
        LIMIT {CLAIM_AHEAD}) c
    JOIN generic_instance s ON s.uid = c.uid
    JOIN ({QUEUES}) q ON {QP}->>'queue_key' = %(queue_key)s
    JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
    WHERE s.tenant_id = %(tenant)s AND {HAS_ENVELOPE} AND {OWN_COLUMNS_VISIBLE}
    ORDER BY {ORDER_BY_COLUMNS}
    LIMIT 1
    FOR UPDATE OF s SKIP LOCKED"""

# After a claim has locked its candidate row: FOR UPDATE re-evaluated the candidate's own
# columns on the newest row version, but its lineage sub-queries ran on the statement's
# older snapshot (RULES.md#claims). This new statement re-reads the lineage.
LINEAGE_BLOCKED = f"""
    SELECT ({ACTIVE_LEASE_EXISTS}) AS leased, ({ACTIVE_HOLD_EXISTS}) AS held
    FROM generic_instance s WHERE s.uid = %(uid)s"""

WORKER_ACTIVE_LEASE_COUNT = (
    f"SELECT {worker_active_leases('%(worker_uid)s', '%(worker_euid)s')} AS n")

# Leases the sweeper marks EXPIRED (RULES.md#leases), locked, skipping any in use.
# Each with its subject (through lineage), in the one statement.
LEASES_PAST_EXPIRY = f"""
    SELECT x.uid, x.euid, x.name, x.template_uid, x.type, x.subtype, x.json_addl,
           x.created_dt, l.parent_instance_uid AS subject_uid
    FROM generic_instance x
    LEFT JOIN generic_instance_lineage l ON l.child_instance_uid = x.uid AND NOT l.is_deleted
     AND l.relationship_type = 'execution_subject_lease'
    WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted AND x.type = 'execution'
      AND x.subtype = 'queue_lease' AND {lease_past_expiry()}
    ORDER BY x.uid FOR UPDATE OF x SKIP LOCKED"""

# An earlier action record of the same request (RULES.md#idempotency).
FIND_REPLAY = """
    SELECT euid, json_addl FROM generic_instance
    WHERE tenant_id = %(tenant)s AND NOT is_deleted AND type = 'execution_queue'
      AND subtype = %(action)s AND json_addl->>'idempotency_key' = %(key)s
      AND json_addl->>'idempotency_scope' = %(scope)s
    ORDER BY uid LIMIT 1"""

# The delivery row of an event message (TapDB's outbox), in the action's transaction.
OUTBOX_INSERT = """
    INSERT INTO outbox_event (message_uid, tenant_id, destination, dedupe_key)
    VALUES (%(message_uid)s, %(tenant)s, %(destination)s, %(dedupe_key)s)"""
