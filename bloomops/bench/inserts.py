"""The statements that write the bench data set: one INSERT ... SELECT per kind of object,
the lineage between them, VACUUM (ANALYZE), and the reset of the claims a run made. Only the bench
writes TapDB rows outside the executor (docs/BENCHMARK.md)."""

from __future__ import annotations

from django.db import connection, transaction

from bloomops.execution.actions.steps import LEASE_CODE, WORKER_CODE
from bloomops.execution.objects import QUEUE_CODE
from bloomops.tapdb.db import execute
from bloomops.tapdb.templates import TemplateRef


def insert_objects(ref: TemplateRef, *, source: str, name: str, props: str,
                    back: str | None, tenant: str, params: dict) -> int:
    """INSERT ... SELECT one object per row of ``source`` (a FROM clause over bench_subject
    ``b``); with ``back``, write the new uid/euid into bench_subject.<back>_uid/_euid."""
    insert = f"""
        INSERT INTO generic_instance
            (euid, euid_prefix, euid_seq, name, tenant_id, polymorphic_discriminator,
             category, type, subtype, version, template_uid, json_addl, bstatus, created_dt)
        SELECT '', '', 0, {name}, %(tenant)s, %(ident)s, %(category)s, %(type)s, %(subtype)s,
               %(version)s, %(template_uid)s,
               jsonb_build_object('semantic_category', %(semantic)s, 'properties', {props}),
               'active', b.created
        FROM {source}
        ORDER BY b.seq"""
    p = dict(params, tenant=tenant, ident=ref.polymorphic_identity, category=ref.category,
             type=ref.type, subtype=ref.subtype, version=ref.version, template_uid=ref.uid,
             semantic=ref.semantic_category)
    if back is None:
        return execute(insert, p)
    return execute(
        f"""
        WITH ins AS ({insert}
            RETURNING uid, euid, (json_addl->'properties'->>'bench_seq')::int AS seq)
        UPDATE bench_subject b SET {back}_uid = ins.uid, {back}_euid = ins.euid
        FROM ins WHERE b.seq = ins.seq
        """,
        p,
    )



def insert_subjects(env: str, tenant: str, params: dict) -> int:
    """Subjects of five templates: the template columns come from bench_queue."""
    return execute(
        f"""
        WITH ins AS (
            INSERT INTO generic_instance
                (euid, euid_prefix, euid_seq, name, tenant_id, polymorphic_discriminator,
                 category, type, subtype, version, template_uid, json_addl, bstatus,
                 created_dt)
            SELECT '', '', 0,
                   q.stem || ' ' || lpad(b.seq::text, greatest(6, length(b.seq::text)), '0'),
                   %(tenant)s,
                   q.ident, q.category, q.type, q.subtype, q.version, q.template_uid,
                   jsonb_build_object('semantic_category', q.semantic, 'properties',
                       jsonb_build_object('site', b.site, 'platform', b.platform,
                                          'assay', b.assay, 'bench_seq', b.seq,
                                          'execution', {env})),
                   'active', b.created
            FROM bench_subject b JOIN bench_queue q USING (qi)
            ORDER BY b.seq
            RETURNING uid, euid, (json_addl->'properties'->>'bench_seq')::int AS seq)
        UPDATE bench_subject b SET uid = ins.uid, euid = ins.euid
        FROM ins WHERE b.seq = ins.seq
        """,
        dict(params, tenant=tenant),
    )


def insert_lineage(tenant: str, refs: dict[str, TemplateRef]) -> int:
    """Every edge in one statement: the seven claim edges of each lease (RULES.md#claims), the three
    edges of each other record, two of each hold and three of each dead letter."""
    # Leases, records, holds and dead letters share one polymorphic identity (data objects).
    lease_t = refs[LEASE_CODE].polymorphic_identity
    worker_t = refs[WORKER_CODE].polymorphic_identity
    queue_t = refs[QUEUE_CODE].polymorphic_identity
    edges = f"""
        SELECT b.uid AS p, b.lease_uid AS c, 'execution_subject_lease' AS rel, q.ident AS pt,
               '{lease_t}' AS ct, b.seq FROM b WHERE b.lease_uid IS NOT NULL
        UNION ALL SELECT b.w_uid, b.lease_uid, 'execution_worker_lease', '{worker_t}',
               '{lease_t}', b.seq FROM b WHERE b.lease_uid IS NOT NULL
        UNION ALL SELECT b.q_uid, b.lease_uid, 'execution_queue_lease', '{queue_t}',
               '{lease_t}', b.seq FROM b WHERE b.lease_uid IS NOT NULL
        UNION ALL SELECT b.lease_uid, b.record_uid, 'execution_lease_record', '{lease_t}',
               '{lease_t}', b.seq FROM b WHERE b.lease_uid IS NOT NULL
        UNION ALL SELECT b.uid, b.record_uid, 'execution_subject_record', q.ident,
               '{lease_t}', b.seq FROM b WHERE b.record_uid IS NOT NULL
        UNION ALL SELECT b.w_uid, b.record_uid, 'execution_worker_record', '{worker_t}',
               '{lease_t}', b.seq FROM b WHERE b.record_uid IS NOT NULL
        UNION ALL SELECT b.q_uid, b.record_uid, 'execution_queue_record', '{queue_t}',
               '{lease_t}', b.seq FROM b WHERE b.record_uid IS NOT NULL
        UNION ALL SELECT b.uid, b.hold_uid, 'execution_subject_hold', q.ident, '{lease_t}',
               b.seq FROM b WHERE b.hold_uid IS NOT NULL
        UNION ALL SELECT b.q_uid, b.hold_uid, 'execution_queue_hold', '{queue_t}',
               '{lease_t}', b.seq FROM b WHERE b.hold_uid IS NOT NULL
        UNION ALL SELECT b.uid, b.dl_uid, 'execution_subject_dead_letter', q.ident,
               '{lease_t}', b.seq FROM b WHERE b.dl_uid IS NOT NULL
        UNION ALL SELECT b.q_uid, b.dl_uid, 'execution_queue_dead_letter', '{queue_t}',
               '{lease_t}', b.seq FROM b WHERE b.dl_uid IS NOT NULL
        UNION ALL SELECT b.record_uid, b.dl_uid, 'execution_record_dead_letter', '{lease_t}',
               '{lease_t}', b.seq FROM b WHERE b.dl_uid IS NOT NULL"""
    # q.ident inside the UNION refers to the subject's template identity, carried on b.
    edges = edges.replace("q.ident", "b.ident")
    return execute(
        f"""
        WITH b AS MATERIALIZED (
            SELECT b.*, q.uid AS q_uid, q.ident, w.uid AS w_uid
            FROM bench_subject b JOIN bench_queue q USING (qi)
            JOIN generic_instance w ON w.tenant_id = %(tenant)s AND NOT w.is_deleted
             AND w.type = 'system' AND w.subtype = 'worker'
             AND w.json_addl->'properties'->>'worker_key' = 'bench://seed/' || b.worker_i
            WHERE b.kind <> 'visible')
        INSERT INTO generic_instance_lineage
            (euid, euid_prefix, euid_seq, name, tenant_id, polymorphic_discriminator,
             parent_instance_uid, child_instance_uid, parent_type, child_type,
             relationship_type)
        SELECT '', '', 0, e.rel, %(tenant)s::uuid, 'generic_instance_lineage',
               e.p, e.c, e.pt, e.ct, e.rel
        FROM ({edges}) e
        ORDER BY e.seq, e.rel
        """,
        {"tenant": tenant},
    )


SETTLED_TABLES = ("generic_instance", "generic_instance_lineage", "generic_template", "audit_log")


def analyze() -> int:
    """Statistics for the planner, and the new rows settled as a running lab's are (hint
    bits set, pages pruned, the visibility map written): the first measurement after a
    load otherwise pays for that, or autovacuum does it while the bench measures (the
    summaries read 1.9x their floor right after a fresh load, 1.56x once it was done).
    TapDB's audit_log too: a million history instances write three million audit rows, and
    autovacuum working through them took a core from the first measurements after the load
    (the first page read 1.31x its figure before the history while it ran, 1.07x after).
    Outside any transaction (VACUUM cannot run in one)."""
    with connection.cursor() as cursor:
        for table in SETTLED_TABLES:
            cursor.execute(f"VACUUM (ANALYZE) {table}")
    return len(SETTLED_TABLES)


def release_bench_claims(worker_key_prefix: str) -> int:
    """Release the leases (and cancel the STARTED records) that earlier bench runs made
    through the executor, so a reused data set keeps its shape. Housekeeping of the bench
    database only, as bulk SQL; returns the number of leases released."""
    like = worker_key_prefix.replace("_", "\\_") + "%%"
    by_worker = f"""
        FROM generic_instance_lineage l JOIN generic_instance w ON w.uid = l.parent_instance_uid
        WHERE l.child_instance_uid = x.uid AND l.relationship_type = %(rel)s
          AND NOT l.is_deleted AND w.type = 'system' AND w.subtype = 'worker'
          AND w.json_addl->'properties'->>'worker_key' LIKE '{like}'"""
    with transaction.atomic():
        execute("SELECT set_config('session.current_username', 'bench-reset', true)")
        released = execute(
            f"""
            UPDATE generic_instance x SET json_addl = jsonb_set(jsonb_set(x.json_addl,
                '{{properties,status}}', '"RELEASED"'),
                '{{properties,release_reason}}', '"BENCH_RESET"')
            {by_worker} AND x.json_addl->'properties'->>'status' = 'ACTIVE'
            """,
            {"rel": "execution_worker_lease"},
        )
        execute(
            f"""
            UPDATE generic_instance x SET json_addl = jsonb_set(x.json_addl,
                '{{properties,status}}', '"CANCELED"')
            {by_worker} AND x.json_addl->'properties'->>'status' = 'STARTED'
            """,
            {"rel": "execution_worker_record"},
        )
    return released


def insert_action_records(tenant: str, ref: TemplateRef) -> int:
    """History (bench/history.py): each bench_subject's completion as an action record
    (unsealed, as another writer's or an older one's would be) with its executed_on edge."""
    return execute(
        """
        WITH ins AS (
            INSERT INTO generic_instance
                (euid, euid_prefix, euid_seq, name, tenant_id, polymorphic_discriminator,
                 category, type, subtype, version, template_uid, json_addl, bstatus,
                 created_dt)
            SELECT '', '', 0, 'complete_queue_execution@' || b.euid, %(tenant)s, %(ident)s,
                   %(category)s, %(type)s, %(subtype)s, %(version)s, %(template_uid)s,
                   jsonb_build_object(
                       'semantic_category', %(semantic)s, 'properties', '{}'::jsonb,
                       'action_group', 'execution_queue',
                       'action_key', 'complete_queue_execution',
                       'executed_by', 'bench-history',
                       'executed_at', to_char((b.created + interval '1 hour') AT TIME ZONE 'UTC',
                                          'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                       'subject_lookup_euid', b.euid, 'queue_lookup_key', q.queue_key,
                       'idempotency_key', 'bench-history-complete-' || b.seq,
                       'idempotency_scope', 'bench-history|' || b.euid,
                       'payload_hash', md5('c' || b.seq), 'target_euid', b.euid,
                       'bench_history_uid', b.uid),
                   'active', b.created + interval '1 hour'
            FROM bench_subject b JOIN bench_queue q USING (qi)
            ORDER BY b.seq
            RETURNING uid, (json_addl->>'bench_history_uid')::bigint AS subject_uid)
        INSERT INTO generic_instance_lineage
            (euid, euid_prefix, euid_seq, name, tenant_id, polymorphic_discriminator,
             parent_instance_uid, child_instance_uid, parent_type, child_type,
             relationship_type)
        SELECT '', '', 0, 'executed_on', %(tenant)s::uuid, 'generic_instance_lineage',
               ins.uid, ins.subject_uid, %(ident)s, q.ident, 'executed_on'
        FROM ins JOIN bench_subject b ON b.uid = ins.subject_uid JOIN bench_queue q USING (qi)
        """,
        {"tenant": tenant, "ident": ref.polymorphic_identity, "category": ref.category,
         "type": ref.type, "subtype": ref.subtype, "version": ref.version,
         "template_uid": ref.uid, "semantic": ref.semantic_category})
