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
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from bloomops.bench import figures
from bloomops.bench.figures import BENCH_ACTOR, CLAIMER_KEY
from bloomops.tapdb.db import fetch_value

# Targets (docs/BENCHMARK.md): (comparison, limit, unit). "ratio" targets compare a figure
# with the history added to its figure at 0 added history, in the same run.
TARGETS: dict[str, tuple[str, float, str]] = {
    "summaries_vs_floor": ("<=", 1.5, "x floor"),
    "summaries_vs_floor_cpu": ("<=", 1.5, "x floor"),
    "first_page": ("<", 50.0, "ms"),
    "diagnostics": ("<", 20.0, "ms"),
    "dashboard": ("<", 5.0, "ms"),
    "throughput": (">=", 100.0, "claims/s"),
    "double_claims": ("==", 0, ""),
}
HISTORY_RATIO = 1.2
RATIO_KEYS = ("summaries", "summaries_cpu", "first_page", "claim_p95", "lease_count",
              "results_hour")


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
        parser.add_argument("--rounds", type=int, default=3, help="8-worker rounds")
        parser.add_argument("--history", type=int, default=0,
                            help="measure, add this many history instances, measure again")
        parser.add_argument("--no-processes", action="store_true",
                            help="skip the 8-process throughput round")

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
        # Django's own tables too (sign-in, sessions, the statistics snapshot): the dashboard
        # figure signs a viewer in and reads the recorder's snapshot.
        call_command("migrate", interactive=False, verbosity=0)
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
        results = [self._measure(opts)]
        if opts["history"]:
            from bloomops.bench.history import add_history

            self.stdout.write(f"\nAdding {opts['history']:,} history instances...")
            started = time.monotonic()
            add_history(opts["history"], log=self.stdout.write)
            self.stdout.write(f"  added in {time.monotonic() - started:.1f} s")
            self._describe()
            results.append(self._measure(opts))
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

    def _reset_claims(self) -> int:
        from bloomops.bench.inserts import release_bench_claims

        return release_bench_claims(CLAIMER_KEY.format(i=""))

    def _measure(self, opts) -> dict[str, Any]:
        from bloomops.bench.data import largest_queue_key
        from bloomops.execution.errors import ActionError
        from bloomops.execution.executor import ActionRequest, Actor, execute

        runs = opts["runs"]
        reset = self._reset_claims()
        if reset:
            self.stdout.write(f"Released {reset} leases left by an earlier bench run.")
        queue_key = largest_queue_key()
        out: dict[str, Any] = {"history": figures.history_count()}
        self.stdout.write(f"\nMeasuring at {out['history']:,} history instances (median of"
                          f" {runs} runs after one warm-up)...")
        out.update(figures.reads(runs, queue_key))
        actor = Actor(username=BENCH_ACTOR, roles=frozenset({"worker_service"}))
        out.update(figures.claims_one_at_a_time(opts["latency_claims"], actor, queue_key))
        worker_euids = [figures.register_claimer(i + 1, actor)
                        for i in range(opts["workers"])]
        rounds = []
        errors: dict[str, int] = {}
        doubled = checked = 0
        # Every round starts from the same queue: the leases of the round before are released
        # first, so the rounds are comparable (within a round, leases pile up at the head).
        for _ in range(opts["rounds"]):
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
        out["process_rate"] = None
        if not opts["no_processes"]:
            # Real workers are processes (run_worker): the same race without Python's GIL.
            self._reset_claims()
            out["process_rate"] = self._throughput_processes(
                worker_euids, actor, queue_key, opts["throughput_claims"])
            d, c = self._double_claims()
            doubled, checked = doubled + d, checked + c
        out["claim_errors"] = errors
        out["double_claims"], out["leases_checked"] = doubled, checked
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

    def _report(self, results: list[dict[str, Any]]) -> None:
        w = self.stdout.write
        r = results[0]
        problems = [res.pop("dashboard") for res in results
                    if isinstance(res.get("dashboard"), str)]
        largest, total = r["largest"]
        w(f"\nLargest queue: {largest} ({total:,} visible); depth of all 20:"
          f" {sum(r['depths'].values()):,} visible")
        heads = [f"at {res['history']:,} hist." for res in results]
        ratio = ["ratio"] if len(results) > 1 else []
        w("")
        w(f"{'measure':<44}" + "".join(f"{h:>17}" for h in heads + ratio) + "   target")
        w("-" * (70 + 17 * len(heads + ratio)))

        def shown(value: Any, unit: str) -> str:
            if value is None:
                return "n/a"
            if unit == "x":  # a ratio against a target such as 1.5x: one more place
                return f"{value:.2f} x"
            return f"{value:,.1f} {unit}".strip() if isinstance(value, float) else (
                f"{value} {unit}".strip())

        def verdict(key: str | None, value: Any) -> str:
            if key not in TARGETS or value is None:
                return ""
            op, limit, unit = TARGETS[key]
            ok = {"<": value < limit, "<=": value <= limit, ">=": value >= limit,
                  "==": value == limit}[op]
            return f"{op} {limit:g} {unit}  {'PASS' if ok else 'FAIL'}"

        def line(label: str, key: str, unit: str) -> None:
            values = [res.get(key) for res in results]
            cells = [shown(v, unit) for v in values]
            target = verdict(key, values[-1])
            if len(results) > 1:
                base, grown = values[0], values[-1]
                rate = grown / base if isinstance(base, float) and base and grown else None
                cells.append(f"{rate:.2f}x" if rate else "")
                if key in RATIO_KEYS and rate:
                    flat = f"<= {HISTORY_RATIO}x at 0 history  "
                    flat += "PASS" if rate <= HISTORY_RATIO else "FAIL"
                    target = f"{target}; {flat}" if target else flat
            w(f"{label:<44}" + "".join(f"{c:>17}" for c in cells) + f"   {target}")

        line("20 queue summaries (queue_summaries)", "summaries", "ms")
        w("floor: the summaries' fields of every routed subject, read")
        line("  as the planner chooses", "floor_planned", "ms")
        line("  in page order (a bitmap of the index)", "floor_pages", "ms")
        line("  the cheaper of the two, round by round", "floor", "ms")
        line("  summaries / floor", "summaries_vs_floor", "x")
        line("the 8 of them still read from JSON", "floor_read", "ms")
        line("  summaries / those", "summaries_vs_read", "x")
        line("summaries, database CPU", "summaries_cpu", "ms")
        line("floor, database CPU", "floor_cpu", "ms")
        line("  summaries / floor in database CPU", "summaries_vs_floor_cpu", "x")
        line("first page of largest queue (50 items)", "first_page", "ms")
        line("subject diagnostics (one subject)", "diagnostics", "ms")
        line("dashboard view, fresh snapshot (db time)", "dashboard", "ms")
        line("a queue's results, last hour (list, counts)", "results_hour", "ms")
        line("worker's active-lease count", "lease_count", "ms")
        line("  (that worker's lease edges, past included)", "lease_edges", "")
        line("claim latency p50, 1 worker", "claim_p50", "ms")
        line("claim latency p95, 1 worker", "claim_p95", "ms")
        line("CPU per claim in the database", "cpu_db", "ms")
        line("CPU per claim in Python", "cpu_py", "ms")
        line(f"claim throughput, 8 threads (median of {len(r['throughput_rounds'])})",
             "throughput", "claims/s")
        line("claim throughput, 8 worker processes", "process_rate", "claims/s")
        line("double claims (subjects with >1 active lease)", "double_claims", "")
        w("-" * (70 + 17 * len(heads + ratio)))
        for problem in problems:
            w(f"dashboard_db_time() failed: {problem}")
        for res in results:
            rounds = ", ".join(f"{x:.0f}" for x in res["throughput_rounds"])
            w(f"at {res['history']:,} history instances: throughput rounds {rounds} claims/s;"
              f" refusals during the race: {res['claim_errors'] or 'none'}; active unexpired"
              f" leases checked: {res['leases_checked']:,}; bench leases released afterwards:"
              f" {res['reset_after']}")
