"""The one clock. Every read and action takes "now" from here, so tests can move time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

_lock = threading.Lock()
_offset = timedelta(0)
_frozen: datetime | None = None


def now() -> datetime:
    with _lock:
        if _frozen is not None:
            return _frozen
        return datetime.now(UTC) + _offset


def freeze(at: datetime) -> None:
    global _frozen
    with _lock:
        _frozen = at.astimezone(UTC)


def advance(seconds: float) -> None:
    """Move time forward; frozen time stays frozen at the later instant."""
    global _frozen, _offset
    with _lock:
        if _frozen is not None:
            _frozen = _frozen + timedelta(seconds=seconds)
        else:
            _offset += timedelta(seconds=seconds)


def reset() -> None:
    global _frozen, _offset
    with _lock:
        _frozen = None
        _offset = timedelta(0)
