"""The outbox dispatcher, on daylily-tapdb's own dispatcher.

The executor writes, in the action's transaction, an event message (generic_instance,
template message/execution/event/1.0) and an outbox_event row with a deterministic dedupe key
(event type : aggregate EUID : action EUID). This module delivers those rows with
``daylily_tapdb.outbox.worker.dispatch_batch``: rows are claimed with SELECT ... FOR UPDATE
SKIP LOCKED and moved to ``delivering`` with a claim lease in the same short transaction, so
two dispatchers never hold the same row; delivery happens outside that transaction; the row
is then marked processed, or failed with exponential backoff (TapDB: 2^attempt s, capped at
30 min), or dead_letter after max attempts. A dispatcher that dies mid-delivery leaves a
``delivering`` row whose lease expires and is reclaimed (at-least-once); the sink receives
the dedupe key as Idempotency-Key, so a receiver de-duplicates that rare redelivery.

It runs on its own SQLAlchemy engine (TapDB's models), separate from Django's connection.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from daylily_tapdb.outbox.contracts import DeliveryResult
from daylily_tapdb.outbox.worker import dispatch_batch
from sqlalchemy import create_engine, event
from sqlalchemy.orm import sessionmaker

from bloomops.tapdb.apps import declare_session

log = logging.getLogger("bloomops.outbox")
RECEIPT_NS = uuid.UUID("6f1c7c52-5a43-4c3e-9a51-0b7e5d1c0a11")


def django_database_url() -> str:
    """The database Django uses right now (the test database under pytest)."""
    from django.db import connection

    d = connection.settings_dict
    query = f"host={quote(d['HOST'])}" if d["HOST"] else ""
    if d["PORT"]:
        query += f"&port={d['PORT']}"
    return (f"postgresql+psycopg2://{quote(d['USER'] or '')}:{quote(d['PASSWORD'] or '')}"
            f"@/{d['NAME']}?{query.lstrip('&')}")


def session_factory(url: str | None = None):
    engine = create_engine(url or django_database_url(), pool_size=2, max_overflow=0,
                           pool_pre_ping=True)

    @event.listens_for(engine, "connect")
    def _identity(dbapi_conn, _record):  # TapDB's triggers read these (audit, EUIDs)
        with dbapi_conn.cursor() as cur:
            declare_session(cur, "bloomops-outbox")
        dbapi_conn.commit()

    return sessionmaker(bind=engine, expire_on_commit=False), engine


def event_body(ev) -> dict[str, Any]:
    """What a sink receives: correlation ids only (no names, no PHI)."""
    msg = ev.message
    props = ((msg.json_addl or {}).get("properties") or {}) if msg is not None else {}
    return {
        "dedupe_key": ev.dedupe_key,
        "destination": ev.destination,
        "tenant_id": str(ev.tenant_id) if ev.tenant_id else None,
        "message_euid": msg.euid if msg is not None else None,
        "event_type": props.get("event_type"),
        "aggregate_euid": props.get("aggregate_euid"),
        "correlation": props.get("correlation") or {},
        "occurred_at": props.get("occurred_at"),
        "state": props.get("state"),
        "revision": props.get("revision"),
        "attempt": int(ev.attempt_count or 0),
    }


def _receipt(ev) -> uuid.UUID:
    return uuid.uuid5(RECEIPT_NS, f"{ev.destination}|{ev.dedupe_key}")


class LogSink:
    """Writes each event as one JSON log line (and to ``record`` when given, for tests)."""

    def __init__(self, record: Callable[[dict], None] | None = None) -> None:
        self.record = record

    def __call__(self, ev) -> DeliveryResult:
        body = event_body(ev)
        log.info(json.dumps({"event": "outbox_delivery", **body}, default=str))
        if self.record:
            self.record(body)
        return DeliveryResult.processed(_receipt(ev))


class WebhookSink:
    """POSTs the event as JSON with Idempotency-Key = dedupe key. 2xx: processed; 4xx other
    than 408/429: rejected (not retried); anything else: retried with backoff."""

    def __init__(self, url: str, *, timeout: float = 10.0, secret: str | None = None) -> None:
        self.url, self.timeout, self.secret = url, timeout, secret

    def __call__(self, ev) -> DeliveryResult:
        body = json.dumps(event_body(ev), default=str).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": ev.dedupe_key,
                   "X-Bloomops-Event": str(event_body(ev)["event_type"])}
        if self.secret:
            headers["Authorization"] = f"Bearer {self.secret}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                status, text = resp.status, resp.read(2000).decode(errors="replace")
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read(2000).decode(errors="replace")
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            return DeliveryResult.transport_failed(f"{type(exc).__name__}: {exc}")
        if 200 <= status < 300:
            return DeliveryResult(success=True, transport_status="processed",
                                  receipt_machine_uuid=_receipt(ev), receipt_status="processed",
                                  http_status=status, response_body_excerpt=text[:500])
        if 400 <= status < 500 and status not in (408, 429):
            return DeliveryResult(success=False, transport_status="rejected",
                                  http_status=status, error_message=f"HTTP {status}: {text}",
                                  retryable=False)
        return DeliveryResult(success=False, transport_status="transport_failed",
                              http_status=status, error_message=f"HTTP {status}: {text}")


def make_sink(spec: str):
    if spec in ("", "log"):
        return LogSink()
    if spec.startswith(("http://", "https://")):
        return WebhookSink(spec)
    raise ValueError("sink must be 'log' or an http(s):// URL")


class Dispatcher:
    def __init__(self, sink, *, url: str | None = None, batch_size: int = 50,
                 lock_timeout_s: int = 300, max_attempts: int = 10) -> None:
        self.sink = sink
        self.sessions, self.engine = session_factory(url)
        self.batch_size, self.lock_timeout_s, self.max_attempts = (batch_size, lock_timeout_s,
                                                                   max_attempts)

    def dispatch_once(self) -> int:
        """Claim and deliver one batch; returns how many rows were claimed."""
        return dispatch_batch(self.sessions, self.sink, batch_size=self.batch_size,
                              lock_timeout_s=self.lock_timeout_s,
                              max_attempts=self.max_attempts)

    def drain(self) -> int:
        total = 0
        while (n := self.dispatch_once()):
            total += n
        return total

    def run(self, *, poll_seconds: float = 1.0, stop=None) -> None:
        while stop is None or not stop.is_set():
            if self.dispatch_once() == 0:
                if stop is not None:
                    stop.wait(poll_seconds)
                else:
                    time.sleep(poll_seconds)

    def close(self) -> None:
        self.engine.dispose()
