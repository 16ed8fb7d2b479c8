"""``manage.py bench`` (``make bench``): the engine on a synthetic TapDB of 100,000 subjects.

Runs against a database of its own (``<default name>_bench`` on the same server, created on
first use), never the demo or test database. The data set is built once and reused while
it is complete; ``--rebuild`` drops and rebuilds it. See docs/BENCHMARK.md.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from bloomops.tapdb.db import fetch_value

TARGETS = {
    "summaries": ("<", 250.0, "ms"),
    "first_page": ("<", 50.0, "ms"),
    "diagnostics": ("<", 20.0, "ms"),
    "throughput": (">=", 200.0, "claims/s"),
    "double_claims": ("==", 0, ""),
}
BENCH_ACTOR = "bench-runner"
CLAIMER_KEY = "bench://claimer/{i}"


def _median_ms(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm-up: plan caches, template cache, buffers
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _pct(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


class Command(BaseCommand):
    help = "Benchmark queue reads and claims on a synthetic 100,000-subject TapDB."

    def add_arguments(self, parser):
        parser.add_argument("--rebuild", action="store_true",
                            help="drop and rebuild the synthetic data set")
        parser.add_argument("--database-name", default=None,
                            help="bench database name (default: <current name>_bench)")
        parser.add_argument("--runs", type=int, default=9, help="runs per read timing")
        parser.add_argument("--latency-claims", type=int, default=200)
        parser.add_argument("--throughput-claims", type=int, default=800,
                            help="claims per 8-worker round (three rounds)")
        parser.add_argument("--workers", type=int, default=8)

    # ------------------------------------------------------------------ database

    def _switch_database(self, name: str | None, rebuild: bool) -> str:
        current = connection.settings_dict["NAME"]
        bench = name or f"{current}_bench"
        if bench == current:
            raise CommandError("The bench database must not be the application database.")
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [bench])
            exists = cursor.fetchone() is not None
            if exists and rebuild:
                self.stdout.write(f"Dropping database {bench} (--rebuild)...")
                cursor.execute(f'DROP DATABASE "{bench}" WITH (FORCE)')
                exists = False
            if not exists:
                cursor.execute(f'CREATE DATABASE "{bench}"')
        # As Django's own test-database set-up does: every connection, in every thread,
        # is made from this settings dict from now on.
        connection.close()
        connection.settings_dict["NAME"] = bench
        return bench

    # ------------------------------------------------------------------ handle

    def handle(self, *args, **opts):
        from bloomops.bench import data as benchdata
        from bloomops.execution.indexes import READ_INDEXES, RETIRED
        from bloomops.tapdb.bootstrap import bootstrap
        from bloomops.tapdb.templates import clear_cache

        logging.getLogger("bloomops.execution").setLevel(logging.WARNING)
        total_started = time.monotonic()
        name = self._switch_database(opts["database_name"], opts["rebuild"])
        self.stdout.write(f"Benchmark database: {name} (host {connection.settings_dict['HOST']})")
        clear_cache()
        for line in bootstrap(read_indexes=READ_INDEXES, retired=RETIRED).lines():
            self.stdout.write("  " + line)
        if benchdata.is_built():
            self.stdout.write("Synthetic data set found: reusing it (--rebuild to rebuild).")
        else:
            if fetch_value(
                "SELECT count(*) FROM generic_instance WHERE json_addl->'properties'"
                " ? 'bench_seq'"
            ):
                raise CommandError(f"{name} holds an incomplete data set; run with --rebuild.")
            self.stdout.write(f"Building the synthetic data set ({benchdata.SUBJECTS:,} subjects,"
                              " 20 queues)...")
            started = time.monotonic()
            benchdata.build(log=self.stdout.write)
            self.stdout.write(f"  built in {time.monotonic() - started:.1f} s")
        self._describe()
        results = self._measure(opts)
        self._report(results)
        self.stdout.write(f"\nTotal bench time: {time.monotonic() - total_started:.1f} s")

    def _describe(self) -> None:
        from bloomops.tapdb.db import fetch_all

        rows = fetch_all(
            """
            SELECT (SELECT count(*) FROM generic_instance) AS instances,
                   (SELECT count(*) FROM generic_instance_lineage) AS edges,
                   (SELECT count(*) FROM audit_log) AS audit_rows,
                   pg_size_pretty(pg_database_size(current_database())) AS size
            """
        )[0]
        self.stdout.write(f"Data: {rows['instances']:,} instances, {rows['edges']:,} lineage"
                          f" edges, {rows['audit_rows']:,} audit rows, {rows['size']}")

    # ------------------------------------------------------------------ measuring

    def _claimer(self, i: int, actor) -> str:
        from bloomops.bench.data import BENCH_CAPABILITY
        from bloomops.execution.executor import ActionRequest, execute

        result = execute(ActionRequest(
            action_key="register_worker", actor=actor,
            idempotency_key=f"bench-register-{uuid.uuid4()}",
            payload={"worker_key": CLAIMER_KEY.format(i=i), "worker_type": "SERVICE",
                     "display_name": f"Bench claimer {i}", "capabilities": [BENCH_CAPABILITY],
                     "max_concurrent_leases": 1000, "heartbeat_ttl_seconds": 3600},
        ))
        return result["worker_euid"]

    def _reset_claims(self) -> int:
        from bloomops.bench.inserts import release_bench_claims

        return release_bench_claims(CLAIMER_KEY.format(i=""))

    def _measure(self, opts) -> dict[str, Any]:
        from bloomops.bench.data import largest_queue_key
        from bloomops.execution import selectors
        from bloomops.execution.errors import ActionError
        from bloomops.execution.executor import ActionRequest, Actor, execute

        runs = opts["runs"]
        out: dict[str, Any] = {}
        reset = self._reset_claims()
        if reset:
            self.stdout.write(f"Released {reset} leases left by an earlier bench run.")
        queue_key = largest_queue_key()
        self.stdout.write(f"\nMeasuring (median of {runs} runs after one warm-up)...")

        summaries = selectors.queue_summaries()
        assert len(summaries) == 20, f"expected 20 queues, found {len(summaries)}"
        depth = {s.queue_key: s.depth for s in summaries}
        out["depths"] = depth
        out["summaries"] = _median_ms(selectors.queue_summaries, runs)
        items, total = selectors.queue_items(queue_key, limit=50)
        out["largest"] = (queue_key, total)
        out["first_page"] = _median_ms(lambda: selectors.queue_items(queue_key, limit=50), runs)
        subject = items[len(items) // 2].euid
        out["diag_subject"] = subject
        out["diagnostics"] = _median_ms(lambda: selectors.subject_diagnostics(subject),
                                        max(runs, 15))

        actor = Actor(username=BENCH_ACTOR, roles=frozenset({"worker_service"}))
        solo = self._claimer(0, actor)
        latencies = []
        for _ in range(opts["latency_claims"]):
            started = time.perf_counter()
            execute(ActionRequest(action_key="claim_queue_item", actor=actor,
                                  idempotency_key=f"bench-claim-{uuid.uuid4()}",
                                  worker_euid=solo, queue_key=queue_key))
            latencies.append((time.perf_counter() - started) * 1000)
        out["claim_p50"] = _pct(latencies, 50)
        out["claim_p95"] = _pct(latencies, 95)

        n_workers = opts["workers"]
        worker_euids = [self._claimer(i + 1, actor) for i in range(n_workers)]
        rounds = []
        errors: dict[str, int] = {}
        doubled = checked = 0
        # Every round starts from the same queue: the leases of the round before are released
        # first, so the rounds are comparable (within a round, leases pile up at the head).
        for _ in range(3):
            self._reset_claims()
            rate, errs = self._throughput(worker_euids, actor, queue_key,
                                          opts["throughput_claims"], ActionError, execute,
                                          ActionRequest)
            rounds.append(rate)
            for k, v in errs.items():
                errors[k] = errors.get(k, 0) + v
            d, c = self._double_claims()
            doubled, checked = doubled + d, checked + c
        out["throughput_rounds"] = rounds
        out["throughput"] = statistics.median(rounds)
        # Real workers are processes (run_worker): the same race without Python's GIL.
        self._reset_claims()
        out["process_rate"] = self._throughput_processes(
            worker_euids, actor, queue_key, opts["throughput_claims"])
        d, c = self._double_claims()
        out["claim_errors"] = errors
        out["double_claims"], out["leases_checked"] = doubled + d, checked + c
        out["reset_after"] = self._reset_claims()
        return out

    def _throughput(self, worker_euids, actor, queue_key, target, ActionError, execute,
                    ActionRequest) -> tuple[float, dict[str, int]]:
        lock = threading.Lock()
        state = {"claims": 0}
        errors: dict[str, int] = {}
        barrier = threading.Barrier(len(worker_euids) + 1)

        def work(worker_euid: str) -> None:
            try:
                barrier.wait()
                while True:
                    with lock:
                        if state["claims"] >= target:
                            return
                    try:
                        execute(ActionRequest(action_key="claim_queue_item", actor=actor,
                                              idempotency_key=f"bench-claim-{uuid.uuid4()}",
                                              worker_euid=worker_euid, queue_key=queue_key))
                    except ActionError as exc:
                        with lock:
                            errors[exc.code] = errors.get(exc.code, 0) + 1
                        if exc.code == "NO_WORK":
                            return
                        continue
                    with lock:
                        state["claims"] += 1
            finally:
                connection.close()

        threads = [threading.Thread(target=work, args=(w,)) for w in worker_euids]
        for t in threads:
            t.start()
        barrier.wait()
        started = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        return state["claims"] / elapsed, errors

    def _throughput_processes(self, worker_euids, actor, queue_key, target) -> float:
        import multiprocessing

        from django.db import connections

        from bloomops.execution.errors import ActionError
        from bloomops.execution.executor import ActionRequest, execute

        ctx = multiprocessing.get_context("fork")
        claims = ctx.Value("i", 0)
        go = ctx.Event()
        ready = ctx.Semaphore(0)

        def work(worker_euid: str) -> None:
            ready.release()
            go.wait()
            while True:
                with claims.get_lock():
                    if claims.value >= target:
                        break
                    claims.value += 1
                try:
                    execute(ActionRequest(action_key="claim_queue_item", actor=actor,
                                          idempotency_key=f"bench-claim-{uuid.uuid4()}",
                                          worker_euid=worker_euid, queue_key=queue_key))
                except ActionError as exc:
                    if exc.code == "NO_WORK":
                        break
            connections.close_all()

        # A forked child must not share the parent's database socket: close it first.
        connections.close_all()
        procs = [ctx.Process(target=work, args=(w,)) for w in worker_euids]
        for proc in procs:
            proc.start()
        for _ in procs:
            ready.acquire()
        started = time.perf_counter()
        go.set()
        for proc in procs:
            proc.join()
        return min(claims.value, target) / (time.perf_counter() - started)

    def _double_claims(self) -> tuple[int, int]:
        from bloomops.execution import clock
        from bloomops.execution.envelope import ts
        from bloomops.tapdb.db import fetch_one

        row = fetch_one(
            """
            SELECT count(*) FILTER (WHERE n > 1) AS doubled, coalesce(sum(n), 0) AS leases
            FROM (SELECT l.parent_instance_uid, count(*) AS n
                  FROM generic_instance_lineage l
                  JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
                  WHERE l.relationship_type = 'execution_subject_lease' AND NOT l.is_deleted
                    AND x.json_addl->'properties'->>'status' = 'ACTIVE'
                    AND x.json_addl->'properties'->>'expires_at' > %s
                  GROUP BY 1) per_subject
            """,
            [ts(clock.now())],
        )
        assert row is not None
        return int(row["doubled"]), int(row["leases"])

    # ------------------------------------------------------------------ report

    def _report(self, r: dict[str, Any]) -> None:
        w = self.stdout.write
        largest, total = r["largest"]
        w(f"\nLargest queue: {largest} ({total:,} visible); depth of all 20:"
          f" {sum(r['depths'].values()):,} visible")
        w("")
        w(f"{'measure':<46} {'figure':>12}   target")
        w("-" * 72)

        def line(label: str, value: float, unit: str, key: str | None = None) -> None:
            target = ""
            if key:
                op, limit, _ = TARGETS[key]
                ok = {"<": value < limit, ">=": value >= limit, "==": value == limit}[op]
                target = f"{op} {limit:g} {unit}  {'PASS' if ok else 'FAIL'}"
            shown = f"{value:,.1f} {unit}" if isinstance(value, float) else f"{value} {unit}"
            w(f"{label:<46} {shown:>12}   {target}")

        line("20 queue summaries (queue_summaries)", r["summaries"], "ms", "summaries")
        line("first page of largest queue (50 items)", r["first_page"], "ms", "first_page")
        line("subject diagnostics (one subject)", r["diagnostics"], "ms", "diagnostics")
        line("claim latency p50, 1 worker", r["claim_p50"], "ms")
        line("claim latency p95, 1 worker", r["claim_p95"], "ms")
        line("claim throughput, 8 workers (median of 3)", r["throughput"], "claims/s",
             "throughput")
        line("claim throughput, 8 worker processes", r["process_rate"], "claims/s",
             "throughput")
        line("double claims (subjects with >1 active lease)", r["double_claims"], "",
             "double_claims")
        rounds = ", ".join(f"{x:.0f}" for x in r["throughput_rounds"])
        w("-" * 72)
        w(f"throughput rounds: {rounds} claims/s; refusals during the race:"
          f" {r['claim_errors'] or 'none'}; active unexpired leases checked:"
          f" {r['leases_checked']:,}; bench leases released afterwards: {r['reset_after']}")
