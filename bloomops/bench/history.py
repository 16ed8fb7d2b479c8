"""The lab's history for ``manage.py bench --history N``: N more instances in the shape a
lab that has been running leaves behind, four per completed subject: the subject
(COMPLETED, routed nowhere), its lease (COMPLETED) with the seven claim edges, its execution
record (SUCCEEDED, finished hours to weeks ago) and the action record of its completion with
its executed_on edge. The leases belong to the 40 seed workers, so a worker's lease edges
grow as they do in a lab. Generated like the data set (``data.py``): INSERT ... SELECT,
TapDB's triggers assign every EUID and write every audit row; in batches, one transaction
each. History subjects carry ``bench_seq`` above ``HISTORY_SEQ`` (the data set's check counts
only its own)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

from django.db import transaction

from bloomops.bench.data import (
    QUEUE_TABLE,
    SEED_WORKERS,
    STEM,
    SUBJECT_CODES,
    SUBJECT_TABLE,
    _ts,
    bench_queues,
    queue_map,
)
from bloomops.bench.inserts import (
    analyze,
    insert_action_records,
    insert_lineage,
    insert_objects,
    insert_subjects,
)
from bloomops.execution.actions.steps import LEASE_CODE, RECORD_CODE, WORKER_CODE
from bloomops.execution.context import ACTION_CODE
from bloomops.execution.envelope import new_envelope
from bloomops.execution.objects import QUEUE_CODE
from bloomops.tapdb.db import execute, fetch_value
from bloomops.tapdb.templates import template
from bloomops.tapdb.tenancy import tenant_of

HISTORY_SEQ = 10_000_000
PER_SUBJECT = 4  # subject, lease, record, action record
BATCH = 25_000  # subjects per transaction
ACTION = ACTION_CODE.format(key="complete_queue_execution")


def history_instances(tenant: str | None = None) -> int:
    """History instances already added (four per history subject)."""
    return PER_SUBJECT * int(fetch_value(
        "SELECT count(*) FROM generic_instance WHERE tenant_id = %(tenant)s"
        " AND (json_addl->'properties'->>'bench_seq')::int > %(seq)s"
        " AND json_addl->'properties' ? 'execution'",
        {"tenant": tenant_of(tenant), "seq": HISTORY_SEQ}) or 0)


def add_history(instances: int, *, tenant: str | None = None,
                log: Callable[[str], None] = print) -> int:
    """Add about ``instances`` history instances; returns how many were added."""
    tenant = tenant_of(tenant)
    subjects = instances // PER_SUBJECT
    start = HISTORY_SEQ + history_instances(tenant) // PER_SUBJECT
    done = 0
    while done < subjects:
        n = min(BATCH, subjects - done)
        started = time.monotonic()
        _batch(tenant, start + done + 1, n)
        done += n
        log(f"  history: {done * PER_SUBJECT:,} of {subjects * PER_SUBJECT:,} instances"
            f" ({time.monotonic() - started:.1f} s for the last {n * PER_SUBJECT:,})")
    analyze()
    return done * PER_SUBJECT


def _queue_table(refs: dict, tenant: str) -> None:
    execute(QUEUE_TABLE)
    for q in bench_queues():
        ref, props = refs[q.code], q.properties()
        execute(
            """
            INSERT INTO bench_queue
            SELECT %(qi)s, %(key)s, g.uid, g.euid, %(code)s, %(t)s, %(ident)s, %(cat)s,
                   %(type)s, %(subtype)s, %(version)s, %(sem)s, %(stem)s, %(platform)s,
                   %(action)s
            FROM generic_instance g
            WHERE g.tenant_id = %(tenant)s AND NOT g.is_deleted AND g.type = 'execution'
              AND g.subtype = 'queue' AND g.json_addl->'properties'->>'queue_key' = %(key)s
            """,
            {"qi": q.index, "key": q.queue_key, "code": q.code, "t": ref.uid,
             "ident": ref.polymorphic_identity, "cat": ref.category, "type": ref.type,
             "subtype": ref.subtype, "version": ref.version, "sem": ref.semantic_category,
             "stem": STEM[q.code],
             "platform": q.platform_scope[0] if q.platform_scope else None,
             "action": props["default_next_action_key"], "tenant": tenant})


def _batch(tenant: str, first_seq: int, n: int) -> None:
    refs = {code: template(code) for code in SUBJECT_CODES + [QUEUE_CODE, LEASE_CODE,
                                                              RECORD_CODE, WORKER_CODE]}
    params = {"now": datetime.now(UTC), "tenant": tenant, "qmap": queue_map(),
              "base_env": json.dumps(new_envelope())}
    with transaction.atomic():
        execute("SELECT set_config('session.current_username', 'bench-history', true)")
        execute("SET LOCAL synchronous_commit = off")
        _queue_table(refs, tenant)
        execute(SUBJECT_TABLE)
        # Finished 2 hours to 4 weeks ago: outside the throughput window, as history is.
        execute(
            """
            INSERT INTO bench_subject (seq, kind, qi, created, ready, due, prio, site,
                                       platform, assay, worker_i, recent)
            SELECT g, 'completed', (%(qmap)s::int[])[1 + (hashint4(g)::bigint & 1023) %% 1000],
                   c.created, c.created, NULL, (g %% 3) * 10,
                   CASE WHEN g %% 2 = 0 THEN 'sfo' ELSE 'rtp' END,
                   CASE WHEN g %% 3 = 0 THEN 'ont' ELSE 'illumina' END,
                   (ARRAY['wgs', 'rna', 'panel'])[1 + g %% 3], g %% %(workers)s, false
            FROM generate_series(%(first)s, %(last)s) g
            CROSS JOIN LATERAL (SELECT %(now)s::timestamptz
                - (3 + (hashint4(g + 1)::bigint & 2147483647) %% 40000) * interval '1 minute'
                AS created) c
            """,
            dict(params, first=first_seq, last=first_seq + n - 1, workers=SEED_WORKERS))
        env = ("(%(base_env)s::jsonb || jsonb_build_object('state', 'COMPLETED',"
               " 'revision', 3, 'next_queue_key', NULL, 'next_action_key', NULL,"
               " 'priority', b.prio, 'ready_at', " + _ts("b.ready") + ","
               " 'attempt_count', 1, 'terminal', true))")
        insert_subjects(env, tenant, params)
        workers = """
            JOIN bench_queue q USING (qi)
            JOIN generic_instance w ON w.tenant_id = %(tenant)s AND NOT w.is_deleted
             AND w.type = 'system' AND w.subtype = 'worker'
             AND w.json_addl->'properties'->>'worker_key' = 'bench://seed/' || b.worker_i"""
        finished = _ts("b.created + interval '1 hour'")
        insert_objects(
            refs[LEASE_CODE], source=f"bench_subject b {workers}",
            name="'Lease ' || b.euid || ' #1'", back="lease", tenant=tenant, params=params,
            props=f"""jsonb_build_object(
                'lease_token', md5('bench-history-' || b.seq),
                'queue_lookup_key', q.queue_key, 'subject_lookup_euid', b.euid,
                'worker_lookup_euid', w.euid, 'status', 'COMPLETED',
                'claimed_at', {_ts("b.created")}, 'heartbeat_at', {_ts("b.created")},
                'expires_at', {_ts("b.created + interval '15 minutes'")},
                'released_at', {finished}, 'release_reason', 'COMPLETED',
                'attempt_number', 1, 'ttl_seconds', 900, 'next_action_key', q.next_action_key,
                'idempotency_key', 'bench-history-claim-' || b.seq,
                'subject_revision_at_claim', 2, 'payload_hash', md5('h' || b.seq),
                'bench_seq', b.seq)""")
        insert_objects(
            refs[RECORD_CODE], source=f"bench_subject b {workers}",
            name="'claim_queue_item ' || b.euid || ' attempt 1'", back="record",
            tenant=tenant, params=params,
            props=f"""jsonb_build_object(
                'subject_lookup_euid', b.euid, 'queue_lookup_key', q.queue_key,
                'worker_lookup_euid', w.euid, 'lease_lookup_euid', b.lease_euid,
                'attempt_number', 1, 'status', 'SUCCEEDED', 'action_key', q.next_action_key,
                'idempotency_key', 'bench-history-claim-' || b.seq,
                'start_state', 'READY', 'end_state', 'COMPLETED', 'start_revision', 2,
                'end_revision', 3, 'started_at', {_ts("b.created")}, 'finished_at', {finished},
                'duration_ms', 3600000, 'retryable', false, 'bench_seq', b.seq)""")
        insert_lineage(tenant, refs)
        insert_action_records(tenant, template(ACTION))
