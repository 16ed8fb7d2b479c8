"""The statistics recorder (RULES.md#statistics): its snapshot is what readers get while it is
fresh and the live figures are the same numbers; counters only grow, across restarts; the
history is thinned and retired; exactly one recorder writes; it outlives a lost connection."""

from __future__ import annotations

import dataclasses
import logging
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bloomops.execution import clock, selectors
from bloomops.execution.models import QueueCounter, QueueSample, QueueSnapshot
from bloomops.execution.objects import load
from bloomops.execution.stats import snapshot
from bloomops.execution.stats.codec import encode_overview
from bloomops.execution.stats.counting import tenant_key
from bloomops.execution.stats.history import LAB, history, write_samples
from bloomops.execution.stats.recorder import Recorder, record
from bloomops.web.charts import recorded_since
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    make_queue,
    make_subject,
    props,
    register,
)
from tests.stats_support import busy_lab

pytestmark = pytest.mark.django_db


def _figures(stats: snapshot.Stats) -> dict:
    data = encode_overview(stats.overview, stats.trend)
    return {k: v for k, v in data.items() if k != "now"}


def _counters() -> dict[tuple[str, str], int]:
    return {(c.queue_key, c.name): c.value for c in QueueCounter.objects.all()}


def test_readers_get_the_snapshot_while_fresh_and_live_when_missing_or_stale(tenant):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    make_subject("q1")
    clock.advance(1)  # subjects made now are ready from the next instant on
    assert snapshot.current().source == snapshot.LIVE  # no recorder ever ran
    taken = clock.now()
    record()
    make_subject("q1")  # after the pass: the snapshot does not know it yet
    clock.advance(1)
    stats = snapshot.current()
    assert (stats.source, stats.as_of) == (snapshot.SNAPSHOT, taken)
    assert stats.overview.summaries[0].depth == 1
    clock.advance(2 * settings.BLOOMOPS_RECORDER_INTERVAL - 1)  # fresh at twice the interval
    assert snapshot.current().source == snapshot.SNAPSHOT
    clock.advance(1)
    stats = snapshot.current()
    assert (stats.source, stats.as_of) == (snapshot.LIVE, clock.now())
    assert stats.overview.summaries[0].depth == 2
    assert stats.snapshot_age_seconds == 2 * settings.BLOOMOPS_RECORDER_INTERVAL + 1


def test_a_queue_change_sends_readers_live_until_the_next_pass(tenant):
    """A queue made (or changed, or retired) after a pass is not in the snapshot: the change
    marks it stale in its own transaction, every reader computes live (and sees the queue)
    until the recorder's next pass, which is fresh again."""
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    record()
    assert snapshot.current().source == snapshot.SNAPSHOT
    act("create_queue", actor("admin"), queue_key="q2", payload={
        "subject_template_codes": ["content/material/specimen/1.0"], "reason": "new step"})
    stats = snapshot.current()
    assert stats.source == snapshot.LIVE
    assert {s.queue_key for s in stats.overview.summaries} == {"q1", "q2"}
    record()
    stats = snapshot.current()
    assert stats.source == snapshot.SNAPSHOT
    assert {s.queue_key for s in stats.overview.summaries} == {"q1", "q2"}
    # other actions leave the snapshot fresh
    make_subject("q1")
    assert snapshot.current().source == snapshot.SNAPSHOT


def test_a_worker_status_change_sends_readers_live_until_the_next_pass(tenant):
    """The dashboard's coverage still counted a worker the admin had just disabled, until
    the recorder's next pass."""
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    worker = register(actor(*SERVICE))
    record()
    assert snapshot.current().overview.summaries[0].worker_online_count == 1
    act("set_worker_status", actor("admin"), worker_euid=worker,
        payload={"operation": "disable", "reason": "bad reagent lot"})
    stats = snapshot.current()
    assert stats.source == snapshot.LIVE
    assert stats.overview.summaries[0].worker_online_count == 0


def test_a_snapshot_from_the_future_is_not_trusted(tenant):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    record()
    clock.advance(-10 * settings.BLOOMOPS_RECORDER_INTERVAL)
    assert snapshot.current().source == snapshot.LIVE


def test_snapshot_and_live_give_identical_numbers(tenant):
    clock.freeze(clock.now())
    busy_lab()
    clock.advance(60)
    record()  # sweeps the expired lease: counted by a pass once settled
    clock.advance(settings.BLOOMOPS_RECORDER_INTERVAL)
    record()
    recorded = snapshot.current()
    live = snapshot.live()
    assert recorded.source == snapshot.SNAPSHOT and live.source == snapshot.LIVE
    a, b = _figures(recorded), _figures(live)
    for x, y in zip(a["summaries"], b["summaries"], strict=True):
        assert {k: v for k, v in x.items() if x[k] != y[k]} == {
            k: v for k, v in y.items() if x[k] != y[k]}
    assert a == b
    by_key = {s.queue_key: s for s in recorded.overview.summaries}
    # the lab's figures, for the record: these are what both agree on
    q1, q2 = by_key["q1"], by_key["q2"]
    assert (q1.depth, q1.successes_window, q1.failures_window) == (3, 1, 2)
    assert (q1.retryable_failures_total, q1.terminal_failures_total, q1.dead_letter_count) == (
        1, 1, 1)
    assert (q2.held_count, q2.expired_leases_total, q2.active_leases) == (1, 1, 0)
    # the stored snapshot carries every field of a summary, so no figure is lost on the way
    stored = QueueSnapshot.objects.get().data["summaries"]
    assert {frozenset(row) for row in stored} == {
        frozenset(f.name for f in dataclasses.fields(selectors.QueueSummary))}


def test_the_recorder_sweeps_expired_leases_through_the_executor(tenant):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[], lease_ttl_seconds=30)
    subject = make_subject("q1")
    clock.advance(1)
    svc = actor("worker_service")
    lease = claim(svc, register(svc))["lease_euid"]
    assert record().expired == 0
    clock.advance(31)
    assert record().expired == 1
    assert props(lease)["status"] == "EXPIRED"
    obj = load(euid=subject, tenant=tenant)
    actions = selectors.action_history(obj.uid)
    assert [(a["action_key"], a["executed_by"]) for a in actions][-1] == (
        "expire_queue_lease", "bloomops-recorder")


def test_counters_only_grow_and_survive_a_restart(tenant):
    clock.freeze(clock.now())
    busy_lab()
    clock.advance(60)
    assert record().seeded  # the first pass counts what finished before it, once
    clock.advance(settings.BLOOMOPS_RECORDER_INTERVAL)
    assert not record().seeded  # ... and the next what finished since (its sweep, here)
    seeded = _counters()
    assert seeded[("q1", "terminal_failures_total")] == 1
    assert seeded[("q2", "expired_leases_total")] == 1
    # more failures while no recorder runs
    svc = actor("worker_service")
    worker = register(svc)
    for n in range(2):
        make_subject("q1", name=f"late{n}")
    clock.advance(1)
    for _ in range(2):
        lease = claim(svc, worker, "q1")
        act("fail_queue_execution", svc, subject_euid=lease["subject_euid"], worker_euid=worker,
            lease_euid=lease["lease_euid"], expected_state="READY",
            payload={"retryable": False, "error_class": "PERMANENT_INPUT",
                     "error_message": "label unreadable"})
    # live readers add what finished since the last pass to the stored counters
    clock.advance(3 * settings.BLOOMOPS_RECORDER_INTERVAL)
    live = {s.queue_key: s for s in snapshot.current().overview.summaries}
    assert live["q1"].terminal_failures_total == 3
    # a new recorder process (a restart) goes on from the stored counters
    restarted = Recorder()
    assert restarted.tick() is not None
    restarted.release()
    after = _counters()
    assert after[("q1", "terminal_failures_total")] == 3
    assert all(after[k] >= v for k, v in seeded.items())
    again = record()
    assert not again.seeded and _counters() == after  # nothing new: nothing counted twice
    stats = {s.queue_key: s for s in snapshot.current().overview.summaries}
    assert stats["q1"].terminal_failures_total == 3


def test_live_totals_do_not_count_again_what_the_recorder_counted(tenant):
    """Once the recorder has counted, the summaries' totals are its counters plus what
    finished since: the records it already counted are not read again (rewriting them changes
    nothing), however long the lab's history."""
    clock.freeze(clock.now())
    busy_lab()
    clock.advance(60)
    record()
    clock.advance(settings.BLOOMOPS_RECORDER_INTERVAL)
    record()
    before = {s.queue_key: (s.retryable_failures_total, s.terminal_failures_total)
              for s in selectors.queue_summaries()}
    assert before["q1"] == (1, 1)
    with connection.cursor() as cur:
        cur.execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
                       '{properties,status}', '"SUCCEEDED"') WHERE subtype = 'execution_record'
                       AND json_addl->'properties'->>'status' LIKE 'FAILED%%'""")
    after = {s.queue_key: (s.retryable_failures_total, s.terminal_failures_total)
             for s in selectors.queue_summaries()}
    assert after == before


def test_history_keeps_minutes_then_hours_then_nothing(tenant, settings):
    settings.BLOOMOPS_HISTORY_DAYS = 14
    # ahead of the wall clock (subjects are ready from when they are made), 10 min into an hour
    start = (clock.now() + timedelta(hours=2)).replace(minute=10, second=5, microsecond=0)
    clock.freeze(start)
    make_queue("q1", required_worker_capabilities=[])
    make_subject("q1")
    clock.advance(1)
    record()
    clock.advance(60)
    make_subject("q1")
    make_subject("q1")
    clock.advance(1)
    record()
    minutes = list(QueueSample.objects.filter(queue_key="q1").order_by("at")
                   .values_list("resolution", "depth"))
    assert minutes == [(60, 1), (60, 3)]
    clock.advance(47 * 3600)  # not yet 48 h old: kept by the minute
    record()
    # the queue's two minutes and the lab's
    assert QueueSample.objects.filter(resolution=60, at__lt=start + timedelta(hours=1)).count() == 4
    clock.advance(3600)
    record()
    hourly = set(QueueSample.objects.filter(resolution=3600)
                 .values_list("queue_key", "at", "depth"))
    assert hourly == {(key, start.replace(minute=0, second=0), 3)  # the hour's highest
                      for key in ("q1", LAB)}
    assert not QueueSample.objects.filter(resolution=60, at__lt=start + timedelta(hours=1))
    clock.advance(14 * 86400)
    record()
    assert not QueueSample.objects.filter(at__lt=clock.now() - timedelta(days=14)).exists()
    assert set(QueueSample.objects.filter(at__gte=clock.now() - timedelta(minutes=1))
               .values_list("queue_key", flat=True)) == {"q1", LAB}


def test_completions_and_failures_land_in_the_samples(tenant):
    clock.freeze(clock.now())
    busy_lab()
    clock.advance(60)
    record()  # the first pass seeds the counters: nothing counted as this minute's
    svc = actor("worker_service")
    worker = register(svc)
    lease = claim(svc, worker, "q1")
    act("complete_queue_execution", svc, subject_euid=lease["subject_euid"], worker_euid=worker,
        lease_euid=lease["lease_euid"], expected_state="READY")
    clock.advance(60)
    record()
    sample = QueueSample.objects.filter(queue_key="q1").order_by("-at").first()
    assert (sample.completions, sample.failures) == (1, 0)


def test_a_pass_reads_what_finished_since_the_last_one_once(tenant):
    """The summaries' totals read the records finished since the last pass; the counters and
    the sample take them from there rather than reading them again."""
    clock.freeze(clock.now())
    busy_lab()
    clock.advance(60)
    record()
    svc = actor("worker_service")
    worker = register(svc)
    lease = claim(svc, worker, "q1")
    act("complete_queue_execution", svc, subject_euid=lease["subject_euid"], worker_euid=worker,
        lease_euid=lease["lease_euid"], expected_state="READY")
    before = _counters()
    clock.advance(60)
    with CaptureQueriesContext(connection) as ctx:
        record()
    # records finished in a span: the summaries' records statement (prepared), or a read
    # of its own
    reads = [q["sql"][:60] for q in ctx.captured_queries
             if q["sql"].startswith("EXECUTE bloomops_summary_records")
             or "finished_at' > " in q["sql"]]
    assert len(reads) == 1 and reads[0].startswith("EXECUTE bloomops_summary_records"), reads
    sample = QueueSample.objects.filter(queue_key="q1").order_by("-at").first()
    assert (sample.completions, sample.failures) == (1, 0)
    # the lease the first pass swept is counted now, from the same read
    assert _counters() == {**before, ("q2", "expired_leases_total"): 1}


def test_run_recorder_once(tenant, capsys):
    make_queue("q1", required_worker_capabilities=[])
    call_command("run_recorder", "--once")
    assert "recorded 1 queue(s)" in capsys.readouterr().out
    assert QueueSnapshot.objects.count() == 1


def _in_thread(target):
    box: dict = {}

    def run():
        try:
            box["value"] = target()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return box.get("value")


def test_two_recorders_one_writes(committed, tenant):
    make_queue("q1", required_worker_capabilities=[])
    first, second = Recorder(), Recorder()
    assert first.tick() is not None
    assert _in_thread(second.tick) is None  # standby while the first holds the lock
    assert first.tick() is not None  # still the writer, the lock held once
    first.release()

    def take_over():
        done = second.tick()
        second.release()
        return done

    assert _in_thread(take_over) is not None
    assert QueueSnapshot.objects.count() == 1


def test_the_recorder_outlives_a_lost_connection(committed, tenant, caplog):
    make_queue("q1", required_worker_capabilities=[])
    stop = threading.Event()
    passes: list[int] = []

    class Watched(Recorder):
        def tick(self):
            done = super().tick()
            passes.append(connection.connection.info.backend_pid)
            if len(passes) == 1:  # the database drops this connection (a restart, say)
                _in_thread(lambda: connection.cursor().execute(
                    "SELECT pg_terminate_backend(%s)", [passes[0]]))
            else:
                stop.set()
            return done

    with caplog.at_level(logging.WARNING, logger="bloomops.recorder"):
        Watched(interval=0.01).run(stop)
    assert len(passes) == 2 and passes[0] != passes[1]  # a new connection, then a pass
    assert "database error" in caplog.text
    assert QueueSnapshot.objects.count() == 1


def test_the_recorder_outlives_a_pass_that_fails(committed, tenant, caplog):
    """A pass that failed otherwise than in the database (a row another writer left of a
    type no reader expects) ended the recorder: readers computed live from then on."""
    make_queue("q1", required_worker_capabilities=[])
    stop = threading.Event()
    passes: list[str] = []

    class Watched(Recorder):
        def tick(self):
            passes.append("pass")
            if len(passes) == 1:
                raise TypeError("a value of a type no reader expects")
            stop.set()
            return super().tick()

    with caplog.at_level(logging.ERROR, logger="bloomops.recorder"):
        Watched(interval=0.01).run(stop)
    assert passes == ["pass", "pass"]
    assert "a pass failed" in caplog.text
    assert QueueSnapshot.objects.count() == 1


def test_the_labs_chart_is_the_labs_highest_and_begins_at_its_first_sample(tenant):
    """A subject moving from q1 to q2 within a quarter hour is one item: the lab's point for
    that bucket is the lab's highest depth (1), not q1's highest plus q2's (2); and a point
    whose samples begin within its bucket sits at its first sample, as the "Samples since"
    line says."""
    now = clock.now().replace(minute=7, second=0, microsecond=0)
    key = tenant_key(tenant)
    for minute, (q1, q2) in enumerate(((1, 0), (0, 1))):
        write_samples(key, now + timedelta(minutes=minute),
                      [selectors.QueueSummary(queue_key=k, euid="", display_name=k,
                                              enabled=True, manual_only=False,
                                              dispatch_priority=0, config={}, depth=d)
                       for k, d in (("q1", q1), ("q2", q2))], {})
    later = now + timedelta(minutes=5)
    wide = history("24h", tenant=key, now=later)
    assert {k: [p.depth for p in v] for k, v in wide.queues.items()} == {"q1": [1], "q2": [1]}
    assert [(p.at, p.depth) for p in wide.lab] == [(now, 1)]
    assert recorded_since(wide) == now
    assert [p.depth for p in history("1h", tenant=key, now=later).lab] == [1, 1]


def test_a_sample_knows_which_finished_records_it_counts(tenant):
    """Each sample keeps the window of finished records its completions and failures count,
    the union of its passes' (a seeding pass counts nothing as its minute's: none), and an
    hour thinned keeps the union of its minutes': what a failure bar lists."""
    start = (clock.now() + timedelta(hours=2)).replace(minute=10, second=0, microsecond=0)
    clock.freeze(start)
    make_queue("q1", required_worker_capabilities=[])
    record()
    first = QueueSample.objects.get(queue_key="q1")
    assert (first.counted_from, first.counted_to) == (None, None)
    passes = []
    for _ in range(3):  # three passes 20 s apart, two of them in the same minute
        clock.advance(20)
        record()
        passes.append(QueueSnapshot.objects.get(tenant=tenant_key(None)).counted_to)
    samples = list(QueueSample.objects.filter(queue_key="q1", resolution=60).order_by("at"))
    windows = [(s.counted_from, s.counted_to) for s in samples]
    seeded_to = passes[0] - timedelta(seconds=20)  # the seeding pass's own counted_to
    minute = [w for s, w in zip(samples, windows, strict=True) if s.at == start][0]
    assert minute == (seeded_to, passes[1])  # the first minute: the union of two passes
    assert windows[-1] == (passes[1], passes[2])  # the next minute: its one pass
    clock.advance(49 * 3600)
    record()
    hour = QueueSample.objects.get(queue_key="q1", resolution=3600)
    assert (hour.counted_from, hour.counted_to) == (seeded_to, passes[2])


def test_a_minutes_depth_is_the_most_its_passes_saw(tenant):
    """The dashboard showed depth 8 while the chart's 1 h maximum said 6: a minute's sample
    was its last pass, and a peak between two samples was lost."""
    now = clock.now().replace(second=0, microsecond=0)
    key = tenant_key(tenant)
    for second, depth in ((0, 6), (10, 8), (20, 5)):  # three passes of one minute
        write_samples(key, now + timedelta(seconds=second),
                      [selectors.QueueSummary(queue_key="q1", euid="", display_name="q1",
                                              enabled=True, manual_only=False,
                                              dispatch_priority=0, config={}, depth=depth)],
                      {})
    assert [p.depth for p in history("1h", tenant=key, now=now + timedelta(minutes=1)
                                     ).queues["q1"]] == [8]
