"""python manage.py run_demo_workers: the living demo of `make run`.

Starts a few slow demo service workers (separate run_worker processes, as svc-extractor) that
work some queues: extraction, post-extraction QC (occasionally holding a sample), analysis
dispatch with a simulated pipeline callback, and analysis QC, each with occasional retryable
failures. Library prep, pooling and run start are left to the humans, and the workers are
slow, so the human queues stay stocked. A worker that exits (crash, kill, lost database) is
started again after a backoff; one an admin disabled or retired is started again only once
it is enabled. SIGTERM/SIGINT stop every worker (they drain and sign off OFFLINE).
BLOOMOPS_DEMO_WORKERS=0 makes `make run` skip this.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.management.base import BaseCommand

from bloomops.execution.objects import worker_by_key
from bloomops.execution.states import STOPPED_WORKER_STATUSES
from bloomops.tapdb.tenancy import tenant_of
from bloomops.worker.management.commands.run_worker import (
    EXIT_NO_HANDLER,
    EXIT_STOPPED_BY_ADMIN,
)

log = logging.getLogger("bloomops.worker")

DEMO_WORKERS = [
    ("demo://wetlab/extractor-1", "Demo extractor 1", "bloomops.worker.handlers.wetlab",
     "wetlab.extraction", ["--delay", "25", "--failure-rate", "0.1"]),
    ("demo://wetlab/extractor-2", "Demo extractor 2", "bloomops.worker.handlers.wetlab",
     "wetlab.extraction", ["--delay", "40", "--failure-rate", "0.1"]),
    ("demo://wetlab/qc-1", "Demo QC station", "bloomops.worker.handlers.wetlab", "wetlab.qc",
     ["--delay", "30", "--failure-rate", "0.05", "--qc-hold-rate", "0.1"]),
    ("demo://compute/dispatcher-1", "Demo pipeline dispatcher",
     "bloomops.worker.handlers.compute", "compute.dispatch,compute.qc",
     ["--delay", "20", "--failure-rate", "0.1", "--pipeline-seconds", "45"]),
]

RESTART_MIN_SECONDS = 1.0
RESTART_MAX_SECONDS = 30.0
# A child that ran this long before exiting was healthy: its next restart starts the
# backoff afresh instead of waiting as long as after a crash loop.
HEALTHY_AFTER_SECONDS = 60.0
# How often a child an admin stopped is asked about again (may_restart).
PARKED_POLL_SECONDS = 10.0


@dataclass
class Child:
    name: str
    command: list[str]
    process: subprocess.Popen | None = None
    started: float = 0.0
    restart_at: float = 0.0
    delay: float = 0.0
    restarts: int = 0
    # exited with EXIT_STOPPED_BY_ADMIN: started again only when may_restart says so
    parked: bool = False
    # exited with EXIT_NO_HANDLER: it would only claim and release again; not started again
    given_up: bool = False


class Supervisor:
    """Keeps one process per command running until stopped. An exited child is restarted
    after RESTART_MIN doubling to RESTART_MAX seconds (reset once it has run
    HEALTHY_AFTER seconds), so a child that cannot start does not spin. A child that exits
    with EXIT_STOPPED_BY_ADMIN is parked: started again once ``may_restart(name)`` is true
    (asked every ``parked_poll`` seconds), never without it. Starting a disabled worker again
    would only register it again (an action record each time) to see it stop. One that exits
    with EXIT_NO_HANDLER is not started again at all: it would claim the item it cannot work
    and release it again, every start."""

    def __init__(self, commands: dict[str, list[str]], *,
                 restart_min: float = RESTART_MIN_SECONDS,
                 restart_max: float = RESTART_MAX_SECONDS,
                 healthy_after: float = HEALTHY_AFTER_SECONDS, stop_timeout: float = 30.0,
                 may_restart: Callable[[str], bool] | None = None,
                 parked_poll: float = PARKED_POLL_SECONDS, **popen_options) -> None:
        self.children = [Child(name, cmd) for name, cmd in commands.items()]
        self.restart_min, self.restart_max = restart_min, restart_max
        self.healthy_after = healthy_after
        self.may_restart, self.parked_poll = may_restart, parked_poll
        self.stop_timeout = stop_timeout
        self.popen_options = popen_options
        self.stop = threading.Event()

    def _start(self, child: Child) -> None:
        child.process = subprocess.Popen(child.command, **self.popen_options)
        child.started = time.monotonic()
        log.info("supervisor: %s started (pid %d)", child.name, child.process.pid)

    def check(self) -> None:
        """Start children that are due: new ones, and exited ones whose backoff is over."""
        now = time.monotonic()
        for child in self.children:
            if child.given_up:
                continue
            if child.process is None:
                self._start(child)
            elif child.process.poll() == EXIT_NO_HANDLER:
                child.given_up = True
                log.error("supervisor: %s has no handler for an item it claimed (its log says"
                          " which); not started again", child.name)
            elif child.process.poll() == EXIT_STOPPED_BY_ADMIN and not child.restart_at:
                child.parked, child.restart_at, child.delay = True, now + self.parked_poll, 0.0
                log.warning("supervisor: %s was stopped by an admin; not started again until"
                            " it is enabled", child.name)
            elif child.parked and now >= child.restart_at:
                if self.may_restart is not None and self.may_restart(child.name):
                    child.parked, child.restart_at = False, 0.0
                    child.restarts += 1
                    self._start(child)
                else:
                    child.restart_at = now + self.parked_poll
            elif child.process.poll() is not None and not child.restart_at:
                ran = now - child.started
                child.delay = (self.restart_min if ran >= self.healthy_after or not child.delay
                               else min(child.delay * 2, self.restart_max))
                child.restart_at = now + child.delay
                log.warning("supervisor: %s (pid %d) exited with %s after %.0f s; restart in"
                            " %.0f s", child.name, child.process.pid, child.process.returncode,
                            ran, child.delay)
            elif child.restart_at and now >= child.restart_at:
                child.restart_at = 0.0
                child.restarts += 1
                self._start(child)

    def run(self, poll: float = 0.5) -> None:
        try:
            while not self.stop.is_set():
                self.check()
                self.stop.wait(poll)
        finally:
            self.terminate()

    def terminate(self) -> None:
        """SIGTERM every running child (they drain), then SIGKILL what is left."""
        running = [c.process for c in self.children
                   if c.process is not None and c.process.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + self.stop_timeout
        for process in running:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Command(BaseCommand):
    help = "Run the demo service workers of the living demo until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--user", default="svc-extractor")
        parser.add_argument("--speed", type=float, default=1.0,
                            help="divide every simulated delay by this")

    def handle(self, *args, **o) -> None:
        logging.getLogger("bloomops").setLevel(logging.INFO)
        commands: dict[str, list[str]] = {}
        for i, (key, name, module, caps, extra) in enumerate(DEMO_WORKERS):
            if "--delay" in extra:
                j = extra.index("--delay") + 1
                extra = [*extra[:j], str(float(extra[j]) / o["speed"]), *extra[j + 1:]]
            commands[key] = [
                sys.executable, str(settings.BASE_DIR / "manage.py"), "run_worker",
                "--worker-key", key, "--display-name", name, "--handlers", module,
                "--capabilities", caps, "--user", o["user"], "--seed", str(100 + i), *extra]
        supervisor = Supervisor(commands, may_restart=_enabled)

        def _stop(*_):
            supervisor.stop.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        self.stdout.write(f"{len(commands)} demo workers starting"
                          " (BLOOMOPS_DEMO_WORKERS=0 turns them off)")
        supervisor.run()


def _enabled(worker_key: str) -> bool:
    """Whether an admin has enabled the worker again (a read; False while it cannot be
    read, so a lost database never starts a worker an admin stopped)."""
    try:
        worker = worker_by_key(worker_key, tenant=tenant_of())
    except Exception:  # noqa: BLE001 - the next poll asks again
        log.warning("supervisor: could not read worker %s", worker_key, exc_info=True)
        return False
    return worker is not None and worker.props.get("status") not in STOPPED_WORKER_STATUSES
