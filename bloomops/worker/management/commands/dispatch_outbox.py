"""python manage.py dispatch_outbox: deliver TapDB outbox events to a sink."""

from __future__ import annotations

import logging
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from bloomops.worker.outbox import Dispatcher, make_sink


class Command(BaseCommand):
    help = ("Deliver outbox_event rows (FOR UPDATE SKIP LOCKED claims, retries with backoff) to"
            " the log or an HTTP webhook. Several dispatchers may run at once.")

    def add_arguments(self, parser):
        parser.add_argument("--sink", default=settings.BLOOMOPS_OUTBOX_SINK,
                            help="'log' or an http(s):// webhook URL (BLOOMOPS_OUTBOX_SINK)")
        parser.add_argument("--batch-size", type=int, default=50)
        parser.add_argument("--poll", type=float, default=1.0)
        parser.add_argument("--lock-timeout", type=int, default=300,
                            help="seconds before a claimed, undelivered row may be reclaimed")
        parser.add_argument("--max-attempts", type=int, default=10)
        parser.add_argument("--once", action="store_true",
                            help="deliver what is due now, then exit")

    def handle(self, *args, **o) -> None:
        logging.getLogger("bloomops").setLevel(logging.INFO)
        try:
            sink = make_sink(o["sink"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        dispatcher = Dispatcher(sink, batch_size=o["batch_size"],
                                lock_timeout_s=o["lock_timeout"],
                                max_attempts=o["max_attempts"])
        try:
            if o["once"]:
                self.stdout.write(f"delivered {dispatcher.drain()} event(s)")
                return
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            dispatcher.run(poll_seconds=o["poll"], stop=stop)
        finally:
            dispatcher.close()
