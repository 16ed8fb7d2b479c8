"""What ``manage.py bench`` measures besides claim throughput: the reads, the floor the
summaries are compared with, claims one at a time with their CPU (database and Python), a
worker's active-lease count, and the dashboard's database time when ``bench/dashboard.py``
provides it. Each figure is a median after one warm-up run."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from django.db import connection

from bloomops.execution.sql import ENV, HAS_ENVELOPE
from bloomops.tapdb.db import execute, fetch_all, fetch_one, fetch_value
from bloomops.tapdb.tenancy import tenant_of

BENCH_ACTOR = "bench-runner"
CLAIMER_KEY = "bench://claimer/{i}"

def _floor(fields: str) -> str:
    """``fields`` read from every routed subject, each envelope (``e``) and the properties
    (``p``) taken out of the row once, and nothing computed from them."""
    return f"""
    SELECT count(({fields}))
    FROM (SELECT s.template_uid, s.created_dt, s.p, s.p->'execution' AS e
          FROM (SELECT s.template_uid, s.created_dt, s.json_addl->'properties' AS p
                FROM generic_instance s
                WHERE s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
                  AND {ENV}->>'next_queue_key' IS NOT NULL
                OFFSET 0) s
          OFFSET 0) s"""


# The floor of the summaries, as their target was set: the fields they needed then (the
# envelope's next_queue_key, state, terminal, cancel_requested, hold_state, retry_at,
# ready_at, priority; the subject's site, platform, assay, template and created_dt) read
# from every routed subject. PostgreSQL cannot answer JSON fields from an index alone.
FLOOR = _floor("e->>'next_queue_key', e->>'state', e->>'terminal', e->>'cancel_requested',"
               " e->>'hold_state', e->>'retry_at', e->>'ready_at', e->>'priority',"
               " p->>'site', p->>'platform', p->>'assay', s.template_uid, s.created_dt")
# What the summaries still take out of the JSON of every routed subject: the queue key and
# the priority now come from the order index's ranges, and site, platform and assay are
# read only for a queue scoped by them (selectors/routed.py). Printed beside the floor so
# the ratio to FLOOR is not read as less work per field than it is.
FLOOR_READ = _floor("e->>'state', e->>'terminal', e->>'cancel_requested', e->>'hold_state',"
                    " e->>'retry_at', e->>'ready_at', s.template_uid, s.created_dt")


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm-up: plan caches, template cache, buffers
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def _backend_cpu() -> Callable[[], float] | None:
    """CPU seconds used so far by this connection's server process, when the server runs on
    this machine (the embedded one does); None otherwise."""
    pid = fetch_value("SELECT pg_backend_pid()")
    path = f"/proc/{pid}/stat"
    if not os.path.exists(path):
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    return read


def paired(fns: dict[str, Callable[[], Any]], runs: int) -> dict[str, list[tuple]]:
    """Each of ``fns`` called in turn, ``runs`` rounds after a warm-up round: per call, the
    wall milliseconds and the server process's CPU milliseconds (None when the server is
    not on this machine). Taking turns keeps a machine whose speed drifts from minute to
    minute (other work, a neighbour) from favouring whichever was measured later."""
    cpu = _backend_cpu()
    for fn in fns.values():
        fn()
    out: dict[str, list[tuple]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            before = cpu() if cpu else None
            started = time.perf_counter()
            fn()
            wall = (time.perf_counter() - started) * 1000
            out[name].append((wall, (cpu() - before) * 1000 if cpu and before is not None
                              else None))
    return out


def _ratio(samples: dict[str, list[tuple]], a: str, b: str, field: int) -> float | None:
    """The median of the round-by-round ratios a / b (0: wall, 1: CPU)."""
    ratios = [x[field] / y[field] for x, y in zip(samples[a], samples[b], strict=True)
              if x[field] is not None and y[field]]
    return statistics.median(ratios) if ratios else None


def _in_page_order(sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """``sql`` read through a bitmap of the index, in the order of the table's pages, not
    in the index's order."""
    execute("SET enable_indexscan = off")
    try:
        return fetch_all(sql, params)
    finally:
        execute("RESET enable_indexscan")


def cheaper(a: list[tuple], b: list[tuple]) -> list[tuple]:
    """Round by round, the lesser wall time and the lesser CPU time of two ``paired``
    samples (a CPU figure missing on one side: the other's)."""
    def least(x: float | None, y: float | None) -> float | None:
        return x if y is None else y if x is None else min(x, y)

    return [tuple(least(x, y) for x, y in zip(ra, rb, strict=True))
            for ra, rb in zip(a, b, strict=True)]


def reads(runs: int, queue_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # Every figure is the work of the one server process measured: a parallel worker's CPU
    # is not in that process's /proc, and a parallel plan lowers the wall time, not the work.
    execute("SET max_parallel_workers_per_gather = 0")
    try:
        _reads(out, runs, queue_key)
    finally:
        execute("RESET max_parallel_workers_per_gather")
    return out


def _reads(out: dict[str, Any], runs: int, queue_key: str) -> None:
    from bloomops.execution import selectors

    summaries = selectors.queue_summaries()
    out["depths"] = {s.queue_key: s.depth for s in summaries}
    tenant = {"tenant": tenant_of(None)}
    # The summaries and their floors taken in turns, each ratio taken round by round; the
    # server's CPU time beside the wall time is steadier on a machine other work shares.
    floors = {"floor": FLOOR, "floor_read": FLOOR_READ}
    samples = paired({"summaries": selectors.queue_summaries} | {
        f"{name}_{how}": partial(read, sql, tenant)
        for name, sql in floors.items()
        for how, read in (("planned", fetch_all), ("pages", _in_page_order))}, runs)
    # Each floor is the cheaper of its two reads, round by round: which one the planner
    # picks turns on a sampled statistic, and a floor is what the read can cost at least.
    for name in floors:
        samples[name] = cheaper(samples[f"{name}_planned"], samples[f"{name}_pages"])
    for name, values in samples.items():
        out[name] = statistics.median(v[0] for v in values)
        cpus = [v[1] for v in values if v[1] is not None]
        out[f"{name}_cpu"] = statistics.median(cpus) if cpus else None
    out["summaries_vs_floor"] = _ratio(samples, "summaries", "floor", 0)
    out["summaries_vs_floor_cpu"] = _ratio(samples, "summaries", "floor", 1)
    out["summaries_vs_read"] = _ratio(samples, "summaries", "floor_read", 0)
    items, total = selectors.queue_items(queue_key, limit=50)
    out["largest"] = (queue_key, total)
    out["first_page"] = median_ms(lambda: selectors.queue_items(queue_key, limit=50), runs)
    subject = items[len(items) // 2].euid
    out["diagnostics"] = median_ms(lambda: selectors.subject_diagnostics(subject),
                                   max(runs, 15))
    out["lease_count"], out["lease_edges"] = _lease_count(runs)
    out["dashboard"] = dashboard_ms()
    out["results_hour"] = median_ms(partial(_results_hour, queue_key), runs)


def _results_hour(queue_key: str) -> None:
    """A queue's Results of the last hour, its list and its counts (RULES.md#results): a
    range of the index of finished records, so history (finished hours to weeks ago) is
    never read."""
    from datetime import timedelta

    from bloomops.execution import clock, selectors

    until = clock.now()
    since = until - timedelta(hours=1)
    selectors.results_recorded(queue_key, since=since, until=until, limit=500)
    selectors.results_tally(queue_key, [], said_keys=[], since=since, until=until)


def _lease_count(runs: int) -> tuple[float, int]:
    """A worker's active-lease count (what every claim asks of its worker), for the seed
    worker with the most lease edges (past leases included)."""
    from bloomops.execution.clock import now
    from bloomops.execution.envelope import ts
    from bloomops.execution.statements import WORKER_ACTIVE_LEASE_COUNT

    row = fetch_one(
        """SELECT w.uid, w.euid, e.n FROM (
               SELECT l.parent_instance_uid AS uid, count(*) AS n
               FROM generic_instance_lineage l
               WHERE l.relationship_type = 'execution_worker_lease' AND NOT l.is_deleted
               GROUP BY 1 ORDER BY 2 DESC LIMIT 1) e
           JOIN generic_instance w ON w.uid = e.uid""")
    if row is None:
        return 0.0, 0
    params = {"worker_uid": row["uid"], "worker_euid": row["euid"], "now": ts(now())}
    return median_ms(lambda: fetch_one(WORKER_ACTIVE_LEASE_COUNT, params), runs), row["n"]


def dashboard_ms() -> float | str | None:
    """The dashboard view's database time with a fresh snapshot, from bench/dashboard.py
    when it is there (the recorder's bench hook); None when it is not, and the error's
    words when it fails (the other figures are still printed)."""
    try:
        from bloomops.bench.dashboard import dashboard_db_time  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return float(dashboard_db_time())
    except Exception as exc:  # a broken hook must not cost the run its other figures
        return f"{type(exc).__name__}: {exc}"[:200]


def register_claimer(i: int, actor) -> str:
    from bloomops.bench.data import BENCH_CAPABILITY
    from bloomops.execution.executor import ActionRequest, execute

    return execute(ActionRequest(
        action_key="register_worker", actor=actor,
        idempotency_key=f"bench-register-{uuid.uuid4()}",
        payload={"worker_key": CLAIMER_KEY.format(i=i), "worker_type": "SERVICE",
                 "display_name": f"Bench claimer {i}", "capabilities": [BENCH_CAPABILITY],
                 "max_concurrent_leases": 1000, "heartbeat_ttl_seconds": 3600},
    ))["worker_euid"]


def claims_one_at_a_time(n: int, actor, queue_key: str) -> dict[str, Any]:
    """n claims of one worker, one after another: latency p50/p95 and CPU per claim, in the
    database server (its process for this connection) and in Python (this thread)."""
    from bloomops.execution.executor import ActionRequest, execute

    worker = register_claimer(0, actor)
    db_cpu = _backend_cpu()
    latencies = []
    db_start = db_cpu() if db_cpu else 0.0
    py_start = time.thread_time()
    for _ in range(n):
        started = time.perf_counter()
        execute(ActionRequest(action_key="claim_queue_item", actor=actor,
                              idempotency_key=f"bench-claim-{uuid.uuid4()}",
                              worker_euid=worker, queue_key=queue_key))
        latencies.append((time.perf_counter() - started) * 1000)
    py = (time.thread_time() - py_start) * 1000 / n
    db = (db_cpu() - db_start) * 1000 / n if db_cpu else None
    return {"claim_p50": pct(latencies, 50), "claim_p95": pct(latencies, 95),
            "cpu_db": db, "cpu_py": py}


def history_count() -> int:
    from bloomops.bench.history import history_instances

    return history_instances()


def connection_name() -> str:
    return str(connection.settings_dict["NAME"])
