"""Bloom LIMS 5.0.1 beside bloomops in the test suite (docs/BLOOM.md): Bloom's cached
environment, databases of a test's own on the test server, and ``bloom(ops)``, which runs
Bloom's own execution-queue service on one of them through tests/bloom/driver.py.

A lab database is cloned from one of two templates built once per session: one that Bloom
created (TapDB's CLI and Bloom's seeding; bloomops attaches to each clone with
``manage.py attach`` when it first uses it), and one that bloomops created
(``bootstrap_tapdb``) and Bloom then attached to. bloomops reads and acts on a lab inside
``lab.bloomops()``, which points Django's connection at it.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections

from bloomops.tapdb import templates as template_cache

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BLOOM_DIR = Path(os.environ.get("BLOOMOPS_BLOOM_DIR", ROOT / "var" / "bloom"))
_names = itertools.count(1)


@functools.cache
def bloom_python() -> Path:
    """Bloom's interpreter; installs Bloom's environment first if it is not cached yet
    (`make test` has done it already; this keeps a bare `pytest` working). An install that
    fails fails the test: there is no skipping."""
    done = subprocess.run(["bash", str(HERE / "install.sh")], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"Installing Bloom's environment failed:\n{done.stdout}\n{done.stderr}",
                    pytrace=False)
    return BLOOM_DIR / "venv" / "bin" / "python"


def server() -> dict[str, Any]:
    """The test server, as the owner role (it creates and drops databases)."""
    db = settings.DATABASE_ROLES["owner"]
    return {"host": db["HOST"] or "localhost", "port": int(db["PORT"] or 5432),
            "user": db["USER"], "password": db["PASSWORD"] or ""}


def query(dbname: str, sql: str, params: tuple = ()) -> list[tuple]:
    """A statement on ``dbname`` on a connection of its own (autocommit), outside both
    systems: what a database administrator would see."""
    s = server()
    conn = psycopg2.connect(host=s["host"], port=s["port"], user=s["user"],
                            password=s["password"], dbname=dbname)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def _admin(sql: str) -> None:
    query("postgres", sql)


def create_database(name: str, template: str | None = None) -> None:
    _admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


def drop_database(name: str) -> None:
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class BloomError(AssertionError):
    """An operation that Bloom's service refused or failed."""


class BloomDriver:
    """One driver process on one database; ``driver(ops)`` runs operations in order and
    returns Bloom's results (``check=False``: each as ``{"ok": ..., "result" | "error"}``)."""

    def __init__(self, dbname: str):
        self.workdir = tempfile.mkdtemp(prefix="bloom-driver-")
        config = {**server(), "dbname": dbname, "workdir": self.workdir,
                  "domain_code": settings.TAPDB_DOMAIN_CODE}
        env = {**os.environ, "PYTHONPATH": str(BLOOM_DIR / "src")}
        self.proc = subprocess.Popen(
            [str(bloom_python()), str(HERE / "driver.py"), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=self.workdir, env=env)
        self._ready = False

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            assert self.proc.stderr is not None
            raise BloomError("Bloom's driver exited:\n" + self.proc.stderr.read()[-4000:])
        return json.loads(line)

    def __call__(self, ops: list[dict[str, Any]], *, check: bool = True) -> list[Any]:
        if not self._ready:
            self._read()
            self._ready = True
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"ops": ops}) + "\n")
        self.proc.stdin.flush()
        results = self._read()["results"]
        if not check:
            return results
        for op, res in zip(ops, results, strict=True):
            if not res["ok"]:
                err = res["error"]
                raise BloomError(f"Bloom refused {op['op']}: {err['type']}: {err['message']}\n"
                                 f"{err['traceback']}")
        return [res["result"] for res in results]

    def one(self, op: str, **fields: Any) -> Any:
        return self([{"op": op, **fields}])[0]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextmanager
def bloomops_on(dbname: str) -> Iterator[None]:
    """bloomops' reads and writes go to ``dbname`` (Django's default connection, reopened
    there); its per-database template cache starts afresh."""
    conn = connections["default"]
    saved = conn.settings_dict["NAME"]
    conn.close()
    conn.settings_dict["NAME"] = dbname
    template_cache.clear_cache()
    try:
        yield
    finally:
        conn.close()
        conn.settings_dict["NAME"] = saved
        template_cache.clear_cache()


def attach_bloomops(dbname: str) -> None:
    """bloomops onto a TapDB another writer created, as a lab does it: ``manage.py attach``."""
    with bloomops_on(dbname):
        call_command("attach", stdout=io.StringIO())


def create_bloomops_database(dbname: str) -> None:
    """A TapDB as bloomops makes its own (``make run``): TapDB bootstrap, Django's tables."""
    with bloomops_on(dbname):
        call_command("bootstrap_tapdb", verbosity=0)
        call_command("migrate", verbosity=0, interactive=False)


def _build_template(creator: str, name: str) -> None:
    drop_database(name)
    create_database(name)
    driver = BloomDriver(name)
    try:
        if creator == "bloom":
            driver.one("create_database")
        else:
            create_bloomops_database(name)
            driver.one("attach_database")
    finally:
        driver.close()


class Lab:
    """A database of one test's own, created by ``creator``: "bloom" (Bloom's own set-up;
    bloomops attaches the first time it is used, after Bloom has written) or "bloomops"
    (bloomops' bootstrap, Bloom attached)."""

    def __init__(self, creator: str, name: str):
        self.creator = creator
        self.name = name
        self.attached = creator == "bloomops"
        self.bloom = BloomDriver(name)

    @contextmanager
    def bloomops(self) -> Iterator[None]:
        if not self.attached:
            attach_bloomops(self.name)
            self.attached = True
        with bloomops_on(self.name):
            yield

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        return query(self.name, sql, params)

    def close(self) -> None:
        self.bloom.close()


@pytest.fixture(scope="session")
def bloom_lab_templates(django_db_setup, django_db_blocker) -> Iterator[dict[str, str]]:
    names = {creator: f"test_bloomops_bloom_tpl_{creator}_{os.getpid()}"
             for creator in ("bloom", "bloomops")}
    built: list[str] = []
    try:
        with django_db_blocker.unblock():
            for creator, name in names.items():
                built.append(name)
                _build_template(creator, name)
        yield names
    finally:
        for name in built:
            drop_database(name)


@pytest.fixture(params=["bloom", "bloomops"], ids=["bloom-created", "bloomops-created"])
def bloom_lab(request, bloom_lab_templates, transactional_db, settings) -> Iterator[Lab]:
    """A lab database of this test's own; bloomops reads and writes it with no tenant
    (tenant_id NULL, as Bloom writes every row)."""
    settings.TAPDB_TENANT_ID = None
    name = f"test_bloomops_bloom_{os.getpid()}_{next(_names)}"
    create_database(name, template=bloom_lab_templates[request.param])
    lab = Lab(request.param, name)
    try:
        yield lab
    finally:
        lab.close()
        drop_database(name)
