"""python manage.py run_demo_workers: the living demo of `make run`.

Starts a few slow demo service workers (separate run_worker processes, as svc-extractor) that
work some queues: extraction, post-extraction QC (occasionally holding a sample), analysis
dispatch with a simulated pipeline callback, and analysis QC, each with occasional retryable
failures. Library prep, pooling and run start are left to the humans, and the workers are
slow, so the human queues stay stocked. SIGTERM/SIGINT stop every worker (they drain and sign
off OFFLINE). BLOOMOPS_DEMO_WORKERS=0 makes `make run` skip this.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

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


class Command(BaseCommand):
    help = "Run the demo service workers of the living demo until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--user", default="svc-extractor")
        parser.add_argument("--speed", type=float, default=1.0,
                            help="divide every simulated delay by this")

    def handle(self, *args, **o) -> None:
        children: list[subprocess.Popen] = []
        stop = threading.Event()
        for i, (key, name, module, caps, extra) in enumerate(DEMO_WORKERS):
            if "--delay" in extra:
                j = extra.index("--delay") + 1
                extra = [*extra[:j], str(float(extra[j]) / o["speed"]), *extra[j + 1:]]
            cmd = [sys.executable, str(settings.BASE_DIR / "manage.py"), "run_worker",
                   "--worker-key", key, "--display-name", name, "--handlers", module,
                   "--capabilities", caps, "--user", o["user"], "--seed", str(100 + i), *extra]
            children.append(subprocess.Popen(cmd))
        self.stdout.write(f"{len(children)} demo workers started"
                          " (BLOOMOPS_DEMO_WORKERS=0 turns them off)")

        def _stop(*_):
            stop.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        while not stop.wait(1.0):
            if all(c.poll() is not None for c in children):
                break
        for c in children:
            if c.poll() is None:
                c.terminate()
        for c in children:
            try:
                c.wait(timeout=30)
            except subprocess.TimeoutExpired:
                c.kill()
