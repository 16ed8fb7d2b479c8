"""The dashboard's database time with a fresh snapshot (RULES.md#statistics): what one
supervisor's dashboard view costs the database once the recorder has run, measured on
whatever data set the caller built (make bench prints it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client

from bloomops.execution.stats.recorder import record

BENCH_VIEWER = "bench-supervisor"
WARM_UP_VIEWS = 6


class _DatabaseTime:
    """An execute_wrapper summing the wall time of every statement sent to PostgreSQL."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.statements = 0

    def __call__(self, execute: Callable, sql: str, params: Any, many: bool,
                 context: dict) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started
            self.statements += 1


def _viewer() -> User:
    user, _ = User.objects.get_or_create(username=BENCH_VIEWER)
    user.groups.add(Group.objects.get(name="operator"))
    return user


def dashboard_db_time(*, runs: int = 5) -> float:
    """Milliseconds of database time of one dashboard view (the whole page, as a signed-in
    operator sees it) right after a recorder pass; the median of ``runs`` views after
    ``WARM_UP_VIEWS``: a web process's connection serves many views, and PostgreSQL plans a
    prepared statement afresh for each of its first five executions before it settles on
    the generic plan those views then use."""
    record()
    client = Client(HTTP_HOST="localhost")
    client.force_login(_viewer())
    for _ in range(WARM_UP_VIEWS):
        client.get("/", secure=True)
    times = []
    for _ in range(runs):
        meter = _DatabaseTime()
        with connection.execute_wrapper(meter):
            response = client.get("/", secure=True)
        assert response.status_code == 200, response.status_code
        times.append(meter.seconds * 1000)
    return sorted(times)[len(times) // 2]
