"""The queue overview the dashboard, the API's queue list and /metrics all read: queue
summaries, workers, and who can serve each queue (RULES.md#metrics): rostered (configured and
able, online or not), online now, and the free lease slots of those online."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from bloomops.execution import clock
from bloomops.execution.people import RosteredPerson, rostered_people, username_of_human_key
from bloomops.execution.policy import can_serve, free_slots, is_able
from bloomops.execution.selectors.queues import QueueSummary, queue_summaries
from bloomops.execution.selectors.workbench import outside_work
from bloomops.execution.selectors.workers import WorkerRow, workers
from bloomops.execution.states import WorkerType


@dataclass
class Coverage:
    """Who can serve one queue, by display name."""

    rostered: list[str] = field(default_factory=list)
    rostered_keys: frozenset[str] = frozenset()
    online: list[str] = field(default_factory=list)
    # lease slots the online workers have left before their limits
    free_slots: int = 0

    @property
    def state(self) -> str:
        """nobody (no one rostered), offline (no one online), busy (everyone online is at
        their lease limit) or ok."""
        if not self.rostered:
            return "nobody"
        if not self.online:
            return "offline"
        return "busy" if self.free_slots == 0 else "ok"


@dataclass
class OutsideWaiting:
    """Work waiting on outside results (RULES.md#reconciliation), in no queue's figures: how
    many, and since when and from which queue the longest has waited; how many of them are
    overdue (past their sending queue's outside_overdue_seconds)."""

    total: int
    since: str | None
    queue_key: str | None
    overdue: int = 0


@dataclass
class Overview:
    now: datetime
    summaries: list[QueueSummary]
    workers: list[WorkerRow]
    # queue_key -> the workers able to serve it now (online coverage)
    serving: dict[str, list[WorkerRow]]
    coverage: dict[str, Coverage] = field(default_factory=dict)
    outside: OutsideWaiting | None = None

    def lag(self, queue_key: str) -> float | None:
        """The worst heartbeat lag among the workers serving a queue."""
        lags = [w.heartbeat_lag_seconds for w in self.serving.get(queue_key, [])
                if w.heartbeat_lag_seconds is not None]
        return max(lags) if lags else None


def _name(worker: WorkerRow) -> str:
    return worker.props.get("display_name") or worker.worker_key


def _coverage(queue: dict, rows: list[WorkerRow], people: list[RosteredPerson],
              serving: list[WorkerRow]) -> Coverage:
    """A person counts once: by their profile as it is now (what their worker takes the next
    time they act) unless an admin disabled or retired their worker; a worker counts by its
    own properties. Whoever is online and able counts as rostered too."""
    by_key = {w.worker_key: w for w in rows}
    rostered: dict[str, str] = {}
    for person in people:
        worker = by_key.get(person.worker_key)
        props = {**(worker.props if worker else {}), **person.profile,
                 "worker_type": WorkerType.HUMAN_SESSION}
        if is_able(props, queue):
            rostered[person.worker_key] = _name(worker) if worker else person.display_name
    for worker in rows:
        person = username_of_human_key(worker.worker_key)
        if person is None and is_able(worker.props, queue):
            rostered[worker.worker_key] = _name(worker)
    for worker in serving:
        rostered.setdefault(worker.worker_key, _name(worker))
    return Coverage(
        rostered=sorted(rostered.values()), rostered_keys=frozenset(rostered),
        online=sorted(_name(w) for w in serving),
        free_slots=sum(free_slots(w.max_concurrent_leases, w.active_leases) for w in serving))


def overview(*, now: datetime | None = None, tenant: str | None = None) -> Overview:
    """Queue summaries (3 queries), workers (1 query), the rostered people (1 query) and the
    work waiting outside (1 query); fills the summaries' worker_online_count,
    worker_rostered_count and worker_free_slots."""
    moment = now or clock.now()
    summaries = queue_summaries(now=moment, tenant=tenant)
    rows = workers(now=moment, tenant=tenant)
    people = rostered_people()
    serving, coverage = {}, {}
    for summary in summaries:
        serving[summary.queue_key] = [w for w in rows if can_serve(w.props, w.computed_status,
                                                                    summary.config)]
        summary.worker_online_count = len(serving[summary.queue_key])
        cover = _coverage(summary.config, rows, people, serving[summary.queue_key])
        coverage[summary.queue_key] = cover
        summary.worker_rostered_count = len(cover.rostered)
        summary.worker_free_slots = cover.free_slots
    longest = outside_work(limit=1, counted=True, tenant=tenant)
    return Overview(now=moment, summaries=summaries, workers=rows, serving=serving,
                    coverage=coverage, outside=OutsideWaiting(
                        int(longest[0]["total"]), longest[0]["since"], longest[0]["queue_key"],
                        int(longest[0]["overdue_total"])) if longest else None)


def queue_coverage(*configs: dict, now: datetime | None = None,
                   tenant: str | None = None) -> list[Coverage]:
    """Who can serve a queue configured so, for each of ``configs`` (the dashboard's coverage,
    for the queue's own page, where its rostered and online people are named in full; a
    settings preview's before and after). Two queries, however many configs."""
    rows = workers(now=now or clock.now(), tenant=tenant)
    people = rostered_people()
    return [_coverage(config, rows, people, [
        w for w in rows if can_serve(w.props, w.computed_status, config)]) for config in configs]


def served_by_nobody(changed: list[tuple[str, dict, dict]], *,
                     tenant: str | None = None) -> list[tuple[str, str]]:
    """For each (queue_key, config, changes): a change of what the queue asks of its workers
    (capabilities, scopes) after which no person's profile and no worker could serve it,
    where some could before: most often a typo ("wetlab.QC"), and its items would wait
    unseen by everyone. Said (the settings preview, apply_queues), not refused: the people
    may be given the capability next. (queue_key, words) each; two queries in all."""
    if not changed:
        return []
    covers = queue_coverage(*(c for _, config, changes in changed
                              for c in (config, {**config, **changes})), tenant=tenant)
    out = []
    for n, (queue_key, _, _) in enumerate(changed):
        now, after = len(covers[2 * n].rostered), covers[2 * n + 1]
        if now and not after.rostered:
            out.append((queue_key, f"With these settings nobody can serve {queue_key}: no"
                        " person's profile and no worker has what it would ask for"
                        f" ({now} can now). Check the spelling, or give the people the"
                        " capability first."))
    return out
