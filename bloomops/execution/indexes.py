"""The read indexes the domain's reads need, handed to the TapDB bootstrap
(``bootstrap(read_indexes=READ_INDEXES, retired=RETIRED)``). The queue-order index is
generated from the one definition of the order (``sql.ORDER_KEYS``), so the index and the
reads that walk it cannot drift apart."""

from __future__ import annotations

import re

from bloomops.execution.objects import SUBJECT_SQL
from bloomops.execution.sql import (
    CANCEL_REQUESTED,
    ENVELOPE_VALID,
    HAS_ENVELOPE,
    ORDER_KEYS,
    OUTSIDE_WORK,
    ROUTED,
    TERMINAL,
    expires_utc,
)
from bloomops.execution.statements import CLAIM_FUNCTION, CLAIM_FUNCTION_DDL


def _unaliased(expr: str) -> str:
    """A read's expression over subject row ``s`` as an index expression over the table."""
    return re.sub(r"\bs\.", "", expr)


def _index_key(expr: str, direction: str) -> str:
    plain = _unaliased(expr)
    return f"{plain if plain.isidentifier() else f'({plain})'} {direction}"


_ORDER_INDEX_KEYS = ", ".join(_index_key(expr, direction) for expr, direction, _ in ORDER_KEYS)

# Indexes the queue reads need, each commented with the read it serves. JSON paths are the
# ones the selectors use verbatim so the planner can match them.
_EXEC = "(json_addl->'properties'->'execution')"
_PROPS = "(json_addl->'properties')"
# Functions the reads and indexes use, created before the indexes. bloomops_utc turns any
# ISO 8601 timestamp text into our fixed-width UTC text (sql.utc): our own form returns as
# it is without parsing (the common case, and what keeps queue reads fast); another form is
# parsed by bloomops_utc_parse, which answers NULL for text it cannot read instead of failing
# the statement. Our own form is told by one LIKE (27 characters, '.' 20th, 'Z' last): one
# pass over the text, about 30 ns a call where length() and two substr() took 400 ns, paid
# for every subject a summary reads. Both are IMMUTABLE by construction: a value without an
# offset is read as UTC, never in the session's time zone. The inner call names its schema:
# PostgreSQL builds and maintains index expressions with a search_path of pg_catalog only.
FUNCTIONS: dict[str, str] = {
    "bloomops_utc_parse": r"""
        CREATE OR REPLACE FUNCTION bloomops_utc_parse(t text) RETURNS text
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
        BEGIN
          IF t !~ '^\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d{1,6})?)?(Z|z|[+-]\d\d(:?\d\d)?)?$' THEN
            RETURN NULL;
          END IF;
          IF t !~ '(Z|z|[+-]\d\d(:?\d\d)?)$' THEN
            t := t || '+00:00';
          END IF;
          RETURN to_char((t::timestamptz) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
        EXCEPTION WHEN others THEN
          RETURN NULL;
        END $$""",
    "bloomops_utc": """
        CREATE OR REPLACE FUNCTION bloomops_utc(t text) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
          SELECT CASE WHEN t IS NULL THEN NULL
                      WHEN t LIKE '___________________.______Z'
                      THEN t ELSE public.bloomops_utc_parse(t) END $$""",
}

READ_INDEXES: dict[str, str] = {
    **FUNCTIONS,
    # Visible items, depth and age (RULES.md#visibility): subjects by tenant + next_queue_key
    # + state, only rows that carry an execution envelope. Serves every queue read and summary.
    # Its key order is the whole queue order (RULES.md#order, sql.ORDER_BY), so "first page"
    # and "next claim" walk the index in queue order and stop after the first visible rows,
    # with no sort. Only subjects routed to a queue are in it (completed subjects drop out).
    "bloomops_routed_order": f"""
        CREATE INDEX IF NOT EXISTS bloomops_routed_order ON generic_instance
        (tenant_id, ({_EXEC}->>'next_queue_key'), {_ORDER_INDEX_KEYS})
        WHERE {_unaliased(HAS_ENVELOPE)}""",
    # Every routed subject by queue, broken envelopes included (ROUTED, not HAS_ENVELOPE):
    # the reads that must see subjects the order index leaves out (a queue's hidden items
    # and its filter menus, the failures' retrying list, a rename's routed count). Without
    # it they read the whole table, the lab's finished history too (1 s at 1.5M instances).
    "bloomops_routed_key": f"""
        CREATE INDEX IF NOT EXISTS bloomops_routed_key ON generic_instance
        (tenant_id, ({_EXEC}->>'next_queue_key'))
        WHERE {_unaliased(ROUTED)}""",
    # Planner statistics (not an index) on the envelope expressions of the visibility
    # predicate.
    # Without them PostgreSQL guesses 0.5 % for "next_queue_key = X" and 50 % for each
    # boolean, expects one row where there are thousands, and picks nested loops.
    "bloomops_envelope_flag_texts_stats": f"""
        CREATE STATISTICS IF NOT EXISTS bloomops_envelope_flag_texts_stats ON
        ({_EXEC}->>'next_queue_key'), ({_EXEC}->>'state'),
        ({_unaliased(TERMINAL)}), ({_unaliased(CANCEL_REQUESTED)}),
        (coalesce({_EXEC}->>'hold_state', 'NONE'))
        FROM generic_instance""",
    # The same for the lease/hold fields every visibility NOT EXISTS reads (status ACTIVE,
    # expires_at > now): without them an anti-join expects a few dozen active leases.
    # The envelope-validity expression (part of the order index's predicate): every routed
    # subject is normally valid, and the planner should know it.
    "bloomops_envelope_valid_stats": f"""
        CREATE STATISTICS IF NOT EXISTS bloomops_envelope_valid_stats ON
        ({_unaliased(ENVELOPE_VALID)}), ({_EXEC}->>'next_queue_key') FROM generic_instance""",
    "bloomops_object_stats": f"""
        CREATE STATISTICS IF NOT EXISTS bloomops_object_stats ON
        ({_PROPS}->>'status'), ({_PROPS}->>'expires_at') FROM generic_instance""",
    # Queues by tenant + template + queue_key; workers by tenant + template + worker_key: the
    # lookup key of their object; unique so a queue or worker key maps to one object.
    "bloomops_queue_key": f"""
        CREATE UNIQUE INDEX IF NOT EXISTS bloomops_queue_key ON generic_instance
        (tenant_id, template_uid, ({_PROPS}->>'queue_key'))
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'queue'""",
    "bloomops_worker_key": f"""
        CREATE UNIQUE INDEX IF NOT EXISTS bloomops_worker_key ON generic_instance
        (tenant_id, template_uid, ({_PROPS}->>'worker_key'))
        WHERE NOT is_deleted AND type = 'system' AND subtype = 'worker'""",
    # With no tenant (tenant_id NULL, as Bloom writes every row) the two above hold nothing:
    # PostgreSQL's NULLs are distinct. These hold a key to one object there, whoever writes.
    "bloomops_queue_key_untenanted": f"""
        CREATE UNIQUE INDEX IF NOT EXISTS bloomops_queue_key_untenanted ON generic_instance
        (template_uid, ({_PROPS}->>'queue_key'))
        WHERE tenant_id IS NULL AND NOT is_deleted AND type = 'execution'
          AND subtype = 'queue'""",
    "bloomops_worker_key_untenanted": f"""
        CREATE UNIQUE INDEX IF NOT EXISTS bloomops_worker_key_untenanted ON generic_instance
        (template_uid, ({_PROPS}->>'worker_key'))
        WHERE tenant_id IS NULL AND NOT is_deleted AND type = 'system'
          AND subtype = 'worker'""",
    # Leases by tenant + template + queue_lookup_key + status + expires_at, and active holds:
    # a small partial index over only ACTIVE leases/holds, the rows every visibility
    # exclusion and active-lease count reads.
    "bloomops_active_objects": f"""
        CREATE INDEX IF NOT EXISTS bloomops_active_objects ON generic_instance
        (tenant_id, template_uid, ({_PROPS}->>'queue_lookup_key'), ({_PROPS}->>'expires_at'))
        WHERE NOT is_deleted AND ({_PROPS}->>'status') = 'ACTIVE'""",
    # ACTIVE objects by their expiry as our UTC text (sql.lease_active): the unexpired leases
    # every whole-queue read starts from (sql.BLOCKED_SUBJECTS) and the leases past expiry
    # the sweeper marks are each one range of it, without reading the ACTIVE holds or
    # evaluating every ACTIVE object's expiry.
    "bloomops_active_expiry": f"""
        CREATE INDEX IF NOT EXISTS bloomops_active_expiry ON generic_instance
        (({_unaliased(expires_utc("s"))}))
        WHERE NOT is_deleted AND ({_PROPS}->>'status') = 'ACTIVE'""",
    # Every ACTIVE object by uid (a few per worker and subject, however long the lab's
    # history): the sets of leased and held subjects (sql.BLOCKED_SUBJECTS) merge with it.
    "bloomops_active_uid": f"""
        CREATE INDEX IF NOT EXISTS bloomops_active_uid ON generic_instance (uid)
        WHERE NOT is_deleted AND ({_PROPS}->>'status') = 'ACTIVE'""",
    # A worker's ACTIVE leases by the worker's EUID copied into the lease (the lookup the data
    # model names: worker_lookup_euid + status): a worker's active-lease count starts from
    # its active leases, and lineage decides which of them are the worker's
    # (sql.worker_active_leases). The leases it held before are not in it.
    "bloomops_lease_worker_active": f"""
        CREATE INDEX IF NOT EXISTS bloomops_lease_worker_active ON generic_instance
        (({_PROPS}->>'worker_lookup_euid'))
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'queue_lease'
          AND ({_PROPS}->>'status') = 'ACTIVE'""",
    # ACTIVE leases by their copied subject EUID: the claim's walk past a crowded head
    # (sql.ACTIVE_LEASE_FOUND).
    "bloomops_lease_active_subject": f"""
        CREATE INDEX IF NOT EXISTS bloomops_lease_active_subject ON generic_instance
        (({_PROPS}->>'subject_lookup_euid'))
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'queue_lease'
          AND ({_PROPS}->>'status') = 'ACTIVE'""",
    # A tenant's ACTIVE leases by queue (the workers' live leases, the sweeper's leases past
    # expiry); leases that ended (the history) are not in it.
    "bloomops_lease_active_queue": f"""
        CREATE INDEX IF NOT EXISTS bloomops_lease_active_queue ON generic_instance
        (tenant_id, ({_PROPS}->>'queue_lookup_key'))
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'queue_lease'
          AND ({_PROPS}->>'status') = 'ACTIVE'""",
    # Leases by tenant + template + subject/worker lookup + status (leases of a worker).
    "bloomops_lease_worker": f"""
        CREATE INDEX IF NOT EXISTS bloomops_lease_worker ON generic_instance
        (tenant_id, template_uid, ({_PROPS}->>'worker_lookup_euid'), ({_PROPS}->>'status'))
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'queue_lease'""",
    # Records by tenant + template + queue_lookup_key + status + finished_at: throughput and
    # failure rate windows and the dashboard trend read finished records per queue.
    "bloomops_record_queue_finished": f"""
        CREATE INDEX IF NOT EXISTS bloomops_record_queue_finished ON generic_instance
        (tenant_id, ({_PROPS}->>'queue_lookup_key'), ({_PROPS}->>'finished_at'),
         ({_PROPS}->>'status'))
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'execution_record'""",
    # Dead letters by queue and resolution state.
    "bloomops_dead_letter_open": f"""
        CREATE INDEX IF NOT EXISTS bloomops_dead_letter_open ON generic_instance
        (tenant_id, ({_PROPS}->>'queue_lookup_key'), ({_PROPS}->>'resolution_state'))
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'dead_letter'""",
    # Subjects whose work is under way outside (RULES.md#reconciliation): the workbench's
    # list of them reads these few rows, not every routed subject.
    "bloomops_outside_work": f"""
        CREATE INDEX IF NOT EXISTS bloomops_outside_work ON generic_instance (tenant_id)
        WHERE NOT is_deleted AND {_unaliased(OUTSIDE_WORK)}""",
    # Work-bearing objects by name in any case (selectors.subjects_named: the intake
    # preview's warning of a name already registered), so a preview reads the names asked
    # about, not every object's. Engine objects (leases, records, actions...) are not in it.
    "bloomops_subject_name": f"""
        CREATE INDEX IF NOT EXISTS bloomops_subject_name ON generic_instance
        (tenant_id, lower(name))
        WHERE NOT is_deleted AND {_unaliased(SUBJECT_SQL)}""",
    # The planner takes no statistics from a partial index's expressions: without these it
    # expects a third of the table for 200 names and reads every row in uid order (110 ms
    # at 155,000 instances; 2.5 ms with them).
    "bloomops_subject_name_stats": """
        CREATE STATISTICS IF NOT EXISTS bloomops_subject_name_stats ON (lower(name))
        FROM generic_instance""",
    # Approvals waiting for a decision (selectors.approvals_waiting, the navigation's count
    # on every page): the approvals decided before are not in it.
    "bloomops_approval_requested": f"""
        CREATE INDEX IF NOT EXISTS bloomops_approval_requested ON generic_instance
        (tenant_id, uid)
        WHERE NOT is_deleted AND type = 'execution' AND subtype = 'approval'
          AND ({_PROPS}->>'status') = 'REQUESTED'""",
    # Idempotency (RULES.md#idempotency): action records by action key + idempotency key.
    "bloomops_action_idempotency": """
        CREATE INDEX IF NOT EXISTS bloomops_action_idempotency ON generic_instance
        (tenant_id, subtype, (json_addl->>'idempotency_key'))
        WHERE NOT is_deleted AND type = 'execution_queue'""",
    # Who did what in a period (selectors.activity, the Activity screen and its export): the
    # action records of a period, and of one person in it, without reading the lab's years.
    "bloomops_action_when": """
        CREATE INDEX IF NOT EXISTS bloomops_action_when ON generic_instance
        (tenant_id, (json_addl->>'executed_at') COLLATE "C")
        WHERE NOT is_deleted AND type = 'execution_queue'""",
    "bloomops_action_by": """
        CREATE INDEX IF NOT EXISTS bloomops_action_by ON generic_instance
        (tenant_id, lower(json_addl->>'executed_by'), (json_addl->>'executed_at') COLLATE "C")
        WHERE NOT is_deleted AND type = 'execution_queue'""",
    # The hash chain (RULES.md#evidence): the previous action record on the same target.
    "bloomops_action_chain": """
        CREATE INDEX IF NOT EXISTS bloomops_action_chain ON generic_instance
        (tenant_id, ((json_addl->'chain'->>'key')), uid)
        WHERE type = 'execution_queue'""",
    # Action records without a seal (another writer's, or one stripped) by target: a
    # subject's chain walk finds them here, not by reading every record of the tenant.
    "bloomops_action_unsealed": """
        CREATE INDEX IF NOT EXISTS bloomops_action_unsealed ON generic_instance
        (tenant_id, (json_addl->>'target_euid'), uid)
        WHERE type = 'execution_queue' AND NOT json_addl ? 'chain'""",
    # Lineage traversal by endpoint and relationship type (every visibility NOT EXISTS, every
    # "relationships are lineage only" read).
    "bloomops_lineage_parent_rel": """
        CREATE INDEX IF NOT EXISTS bloomops_lineage_parent_rel ON generic_instance_lineage
        (parent_instance_uid, relationship_type, child_instance_uid) WHERE NOT is_deleted""",
    # Every edge of one relationship type (all active-lease or active-hold edges at once,
    # for the set form of the visibility predicate), readable from the index alone.
    "bloomops_lineage_rel_child": """
        CREATE INDEX IF NOT EXISTS bloomops_lineage_rel_child ON generic_instance_lineage
        (relationship_type, child_instance_uid) INCLUDE (parent_instance_uid)
        WHERE NOT is_deleted""",
    "bloomops_lineage_child_rel": """
        CREATE INDEX IF NOT EXISTS bloomops_lineage_child_rel ON generic_instance_lineage
        (child_instance_uid, relationship_type, parent_instance_uid) WHERE NOT is_deleted""",
    # Not an index: the claim's choice of subject, a function so that the walk of the queue
    # goes on past a candidate another claimer leased meanwhile (statements.py).
    CLAIM_FUNCTION: CLAIM_FUNCTION_DDL,
}

# The unique indexes that hold a key to one object: a write refused by one lost a race with
# another writer creating the same key (the executor says CONCURRENT_UPDATE).
ONE_OBJECT_PER_KEY = frozenset({"bloomops_queue_key", "bloomops_worker_key",
                                "bloomops_queue_key_untenanted",
                                "bloomops_worker_key_untenanted"})
assert ONE_OBJECT_PER_KEY <= set(READ_INDEXES)

# Indexes and statistics an earlier version created and a later one replaced.
RETIRED: tuple[tuple[str, str], ...] = (
    ("INDEX", "bloomops_subject_queue_state"),
    # Ordered by timestamps as stored, over every routed subject; the order now reads them
    # through bloomops_utc, over routed subjects with a valid envelope.
    ("INDEX", "bloomops_subject_queue_order"),
    # Built on ::boolean casts of the flags; the reads now compare JSON (RULES.md#envelope).
    ("STATISTICS", "bloomops_envelope_stats"),
    # Ordered by a priority cast without asking the JSON type first (any read of a row
    # outside the index, where another writer may have stored a text, could fail on it).
    ("INDEX", "bloomops_queue_order"),
    # On the flags compared as JSON; the reads now compare their text (sql.env_flag), and
    # statistics serve only the expressions they were built on.
    ("STATISTICS", "bloomops_envelope_flags_stats"),
    # ACTIVE and EXPIRED leases by queue, for an all-time expired count now kept as a counter.
    ("INDEX", "bloomops_lease_open"),
    # Failed records by queue, for all-time failure totals now kept as counters.
    ("INDEX", "bloomops_record_failures"),
    # The claim's walk before it kept to the claiming worker's own scopes
    # (bloomops_claim_in_scope).
    ("FUNCTION", "bloomops_claim_next"),
)
