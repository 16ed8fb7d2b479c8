"""python manage.py run_worker: one service worker running the loop of
bloomops/worker/runtime.py."""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys

from django.core.management.base import BaseCommand, CommandError

from bloomops.execution.errors import ActionError
from bloomops.worker.faults import Fault
from bloomops.worker.runtime import WorkerRuntime
from bloomops.worker.transport import DirectTransport, HttpTransport

# The exit status of a worker an admin disabled or retired: a supervisor must not start it
# again until it is enabled (systemd: RestartPreventExitStatus=3; docs/DEPLOY.md).
EXIT_STOPPED_BY_ADMIN = 3
# A worker that claimed an item whose step it has no handler for stops (the item released,
# not failed): starting it again would only claim and release again until it is mended.
EXIT_NO_HANDLER = 4


def _list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


class Command(BaseCommand):
    help = ("Run a service worker: register, heartbeat, claim in dispatch and queue order, run a"
            " handler module, complete or fail; database and API faults are waited out;"
            " SIGTERM drains and signs off OFFLINE.")

    def add_arguments(self, parser):
        parser.add_argument("--worker-key", required=True)
        parser.add_argument("--display-name")
        parser.add_argument("--handlers", default="bloomops.worker.handlers.demo",
                            help="module with a Handlers class (default: every demo handler)")
        parser.add_argument("--capabilities", help="comma list (default: the handlers')")
        parser.add_argument("--site-scope")
        parser.add_argument("--platform-scope")
        parser.add_argument("--assay-scope")
        parser.add_argument("--worker-type", default="SERVICE",
                            choices=["SERVICE", "INSTRUMENT_ADAPTER"])
        parser.add_argument("--heartbeat-ttl", type=int, default=60)
        parser.add_argument("--user", default=os.environ.get("BLOOMOPS_WORKER_USER",
                                                             "svc-extractor"),
                            help="Django user to act as (direct mode)")
        parser.add_argument("--api-url", default=os.environ.get("BLOOMOPS_API_URL"),
                            help="talk to the JSON API at this server (http://host:port,"
                                 " or its API base path .../api/v1/execution/) instead of the"
                                 " executor (needs --token or BLOOMOPS_API_TOKEN)")
        parser.add_argument("--token", default=os.environ.get("BLOOMOPS_API_TOKEN"))
        parser.add_argument("--delay", type=float, default=0.0,
                            help="simulated seconds of work per item (demo)")
        parser.add_argument("--failure-rate", type=float, default=0.0,
                            help="share of items failing with a retryable error (demo)")
        parser.add_argument("--qc-hold-rate", type=float, default=0.0)
        parser.add_argument("--pipeline-seconds", type=float, default=0.0)
        parser.add_argument("--seed", type=int)
        parser.add_argument("--max-items", type=int)
        parser.add_argument("--exit-when-idle", action="store_true")
        parser.add_argument("--poll-max", type=float, default=5.0)

    def handle(self, *args, **o) -> None:
        logging.getLogger("bloomops").setLevel(logging.INFO)
        try:
            module = importlib.import_module(o["handlers"])
        except ImportError as exc:
            raise CommandError(f"Cannot import handlers {o['handlers']!r}: {exc}") from None
        handlers = module.Handlers(delay=o["delay"], failure_rate=o["failure_rate"],
                                   seed=o["seed"], qc_hold_rate=o["qc_hold_rate"],
                                   pipeline_seconds=o["pipeline_seconds"])
        if o["api_url"]:
            if not o["token"]:
                raise CommandError("--api-url needs --token or BLOOMOPS_API_TOKEN.")
            transport = HttpTransport(o["api_url"], o["token"])
        else:
            transport = DirectTransport(o["user"])
        runtime = WorkerRuntime(
            transport, handlers, worker_key=o["worker_key"], display_name=o["display_name"],
            capabilities=_list(o["capabilities"]), worker_type=o["worker_type"],
            site_scope=_list(o["site_scope"]), platform_scope=_list(o["platform_scope"]),
            assay_scope=_list(o["assay_scope"]), heartbeat_ttl_seconds=o["heartbeat_ttl"],
            max_items=o["max_items"], exit_when_idle=o["exit_when_idle"],
            poll_max=o["poll_max"])
        signal.signal(signal.SIGTERM, runtime.request_stop)
        signal.signal(signal.SIGINT, runtime.request_stop)
        try:
            stats = runtime.run()
        except (ActionError, Fault) as exc:
            # Only registration ends the process this way (a refused token or user, a bug
            # that repeats): nothing waiting would cure. A supervisor may start it again.
            raise CommandError(f"worker {o['worker_key']} could not register: {exc}") from None
        self.stdout.write(f"worker {o['worker_key']} stopped: {stats}")
        if runtime.unhandled:
            self.stderr.write(f"worker {o['worker_key']} stopped: {runtime.unhandled} (the item"
                              " was not failed). Give its handlers"
                              f" ({o['handlers']}) that action, or it capabilities that leave"
                              " the queue to another worker, then start it again.")
            sys.exit(EXIT_NO_HANDLER)
        if runtime.stopped_by_admin:
            self.stderr.write(f"worker {o['worker_key']} is {runtime.status} by an admin: not"
                              " starting again until it is enabled.")
            sys.exit(EXIT_STOPPED_BY_ADMIN)
