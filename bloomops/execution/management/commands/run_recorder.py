"""python manage.py run_recorder: the statistics recorder (RULES.md#statistics)."""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand

from bloomops.execution.stats.recorder import Recorder
from bloomops.execution.stats.snapshot import interval_seconds


class Command(BaseCommand):
    help = ("Every BLOOMOPS_RECORDER_INTERVAL seconds: sweep expired leases, compute the queue"
            " statistics once and store the snapshot, counters and history every dashboard,"
            " /metrics scrape and API summary reads. Start one per deployment (a second one"
            " waits as a standby).")

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=None,
                            help=f"seconds between passes (default {interval_seconds()})")
        parser.add_argument("--once", action="store_true",
                            help="one pass now (unless another recorder holds the lock),"
                                 " then exit")

    def handle(self, *args, **o) -> None:
        if o["once"]:
            recorder = Recorder()
            done = recorder.tick()
            recorder.release()
            self.stdout.write("standby: another recorder is writing" if done is None else
                              f"recorded {done.queues} queue(s), swept {done.expired} lease(s)")
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        Recorder(interval=o["interval"]).run(stop)
