"""Faults a worker outlives (docs/ARCHITECTURE.md, "Workers survive faults").

A fault is any exception from a transport call that is not a refusal (ActionError). Transient
ones (the database connection lost or refused, the API unreachable, a 5xx or non-JSON answer,
a timeout) are retried after an exponential backoff with jitter, for as long as it takes.
Anything else (a bug, a row nobody expected) is retried a few times, then given up as a
Fault so that one bad item cannot stall a worker forever.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection

from bloomops.execution.errors import ActionError
from bloomops.worker.transport import TransportError

log = logging.getLogger("bloomops.worker")
T = TypeVar("T")
FAULT_MIN_SECONDS = 0.1
FAULT_MAX_SECONDS = 8.0
UNEXPECTED_TRIES = 3


class Fault(Exception):
    """A call that kept failing: given up because the worker is stopping, or because the
    error is not one that waiting cures."""

    def __init__(self, what: str, cause: BaseException) -> None:
        super().__init__(f"{what}: {describe(cause)}")
        self.what = what
        self.cause = cause


class Backoff:
    """Delays of 0.1 s, 0.2 s, 0.4 s ... up to a cap, each drawn from [d/2, d] ("equal
    jitter") so that workers that lost the same server do not come back in lockstep."""

    def __init__(self, first: float = FAULT_MIN_SECONDS, cap: float = FAULT_MAX_SECONDS,
                 rng: random.Random | None = None) -> None:
        self.first, self.cap = first, cap
        self.rng = rng or random.Random()
        self.attempt = 0

    def next(self) -> float:
        delay = min(self.cap, self.first * 2 ** self.attempt)
        self.attempt += 1
        return delay / 2 + self.rng.random() * delay / 2

    def reset(self) -> None:
        self.attempt = 0


def is_transient(exc: BaseException) -> bool:
    """True for faults that waiting cures. Call before drop_broken_connection: a connection
    that died mid-statement can surface as any DatabaseError, so the connection's own state
    decides for the rest."""
    if isinstance(exc, TransportError | OperationalError | InterfaceError | TimeoutError
                  | ConnectionError):
        return True
    if isinstance(exc, DatabaseError):
        try:
            return connection.connection is None or not connection.is_usable()
        except Exception:  # noqa: BLE001 - probing a broken connection may fail any way
            return True
    return False


def drop_broken_connection(exc: BaseException) -> None:
    """After a database error, close this thread's connection: Django does not drop a broken
    connection outside a request cycle, and the next call then connects afresh."""
    if not isinstance(exc, DatabaseError):
        return
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - closing a dead socket may fail; it is gone either way
        pass


def describe(exc: BaseException) -> str:
    """One log line: exception class and the first line of its text."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def retrying(what: str, fn: Callable[[], T], *, stop: threading.Event, backoff: Backoff,
             persist: bool = True, on_fault: Callable[[], None] | None = None) -> T:
    """fn() until it answers or refuses (ActionError, re-raised). Each fault is logged (one
    line), the broken database connection dropped, and fn retried after the backoff:
    transient faults for as long as it takes, others UNEXPECTED_TRIES times. Raises Fault
    when giving up: at once if `stop` is set or persist is off."""
    unexpected = 0
    while True:
        try:
            return fn()
        except ActionError:
            raise
        except Exception as exc:
            transient = is_transient(exc)
            drop_broken_connection(exc)
            if on_fault:
                on_fault()
            unexpected += 0 if transient else 1
            if not persist or stop.is_set() or unexpected >= UNEXPECTED_TRIES:
                log.warning("%s failed (%s); giving up", what, describe(exc))
                raise Fault(what, exc) from exc
            delay = backoff.next()
            log.warning("%s failed (%s); retry in %.1f s", what, describe(exc), delay)
            stop.wait(delay)
