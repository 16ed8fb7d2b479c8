"""A value worked out once per HTTP request, however many templates, tags and context
processors of the page ask for it (beneath every layer, as ``text.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def per_request(request: Any, name: str, compute: Callable[[], T]) -> T:
    """``compute()``, kept on ``request`` under ``name`` for the rest of it (computed each
    time when there is no request: a template rendered outside one)."""
    if request is None:
        return compute()
    attr = f"_bloomops_{name}"
    if not hasattr(request, attr):
        setattr(request, attr, compute())
    return getattr(request, attr)
