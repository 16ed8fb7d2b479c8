"""Drives Bloom LIMS 5.0.1's own execution-queue service for the interop tests (docs/BLOOM.md).

Runs with Bloom's Python (var/bloom/venv, Bloom's sdist on PYTHONPATH), never with
bloomops'. ``argv[1]`` is a JSON object: the PostgreSQL server (``host``, a name or a unix socket
directory, ``port``, ``user``, ``password``, ``dbname``),
``workdir`` (where Bloom's config files go) and ``domain_code``. Then one JSON request per
line on stdin, ``{"ops": [...]}``, answered by one JSON line ``{"results": [...]}``; each
result is ``{"ok": true, "result": ..., "ms": ...}`` or ``{"ok": false, "error": {...}}``.

Every service operation runs as Bloom's API runs it: a new ExecutionQueueService per call,
closed afterwards (a read's uncommitted writes are rolled back), with the driver's movable
clock. Operation names are the service's method names; their fields are the method's
request model (``bloom_lims.schemas.execution_queue``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ENV = "dev"
OWNER_REPO = "bloom"
# TapDB's own identity prefixes (TPX templates, EDG lineage, ADT audit, SYS users, MSG
# messages), claimed for TapDB in the prefix ownership registry as its `db setup` does.
TAPDB_PREFIXES = ("ADT", "EDG", "MSG", "SYS", "TPX")


def write_bloom_config(cfg: dict[str, Any], port: int) -> None:
    """Bloom's and TapDB's config files under the workdir, and the environment variables by
    which Bloom finds them (paths must be absolute)."""
    work = Path(cfg["workdir"]).resolve()
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    domain = cfg.get("domain_code", "Z")
    domains = work / "domain_code_registry.json"
    domains.write_text(json.dumps(
        {"version": "0.4.0", "domains": {domain: {"name": "bloomops interop"}}}))
    prefixes = work / "prefix_ownership_registry.json"
    prefixes.write_text(json.dumps({"version": "0.4.0", "ownership": {
        domain: {p: {"issuer_app_code": "daylily-tapdb"} for p in TAPDB_PREFIXES}}}))
    tapdb_config = work / "tapdb-config.yaml"
    tapdb_config.write_text(json.dumps({
        "meta": {
            "config_version": 3, "client_id": "bloom", "database_name": "bloom",
            "owner_repo_name": OWNER_REPO, "domain_registry_path": str(domains),
            "prefix_ownership_registry_path": str(prefixes),
        },
        "admin": {"session_secret": uuid.uuid4().hex, "auth_mode": "disabled",
                  "metrics": {"enabled": False}},
        "environments": {ENV: {
            "engine_type": "local", "host": "localhost", "port": str(port),
            "ui_port": "8911", "domain_code": domain, "user": cfg["user"],
            "password": cfg.get("password") or "", "database": cfg["dbname"],
        }},
    }))
    tapdb_config.chmod(0o600)  # TapDB warns about a config others can read
    bloom_config = work / "bloom-config.yaml"
    bloom_config.write_text("")
    os.environ.update({
        "BLOOM_TAPDB__ENV": ENV,
        "BLOOM_TAPDB__CONFIG_PATH": str(tapdb_config),
        "BLOOM_TAPDB__DOMAIN_CODE": domain,
        "BLOOM_TAPDB__OWNER_REPO_NAME": OWNER_REPO,
        "BLOOM_TAPDB__DOMAIN_REGISTRY_PATH": str(domains),
        "BLOOM_TAPDB__PREFIX_OWNERSHIP_REGISTRY_PATH": str(prefixes),
        "BLOOM_CONFIG_PATH": str(bloom_config),
        # Bloom and TapDB write rendered configs, logs and uploads under these.
        "HOME": str(work), "XDG_CONFIG_HOME": str(work / "config"), "TMPDIR": str(work / "tmp"),
    })


class Bridge:
    """TapDB's config takes a local server only as TCP on ``localhost``, and TapDB's CLI runs
    psql with it; a server reached otherwise (the embedded one listens on its unix socket
    only) is reached by psql through this bridge. Bloom's own connections go to the server
    directly (``route_connections``)."""

    def __init__(self, target: str | tuple[str, int]):
        self.target = target
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            if isinstance(self.target, str):
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            else:
                server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.connect(self.target)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def route_connections(host: str, port: int) -> None:
    """Bloom's SQLAlchemy connections go straight to the server (a socket directory or a
    host), whatever host its TapDB config names: SQLAlchemy's do_connect hook."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "do_connect")
    def _to_server(dialect, conn_rec, cargs, cparams) -> None:
        cparams["host"], cparams["port"] = host, port


class Driver:
    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.now = datetime.now(UTC).replace(microsecond=0)
        self.bdb = None

    def clock(self) -> datetime:
        return self.now

    # -- set-up ---------------------------------------------------------------------------

    def tapdb_cli(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "daylily_tapdb.cli", "--config",
               os.environ["BLOOM_TAPDB__CONFIG_PATH"], "--env", ENV, *args]
        env = {**os.environ, "MERIDIAN_DOMAIN_CODE": self.cfg.get("domain_code", "Z"),
               "TAPDB_DOMAIN_CODE": self.cfg.get("domain_code", "Z"),
               "TAPDB_OWNER_REPO": OWNER_REPO,
               "TAPDB_DOMAIN_REGISTRY_PATH": os.environ["BLOOM_TAPDB__DOMAIN_REGISTRY_PATH"],
               "TAPDB_PREFIX_OWNERSHIP_REGISTRY_PATH":
                   os.environ["BLOOM_TAPDB__PREFIX_OWNERSHIP_REGISTRY_PATH"]}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"tapdb {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")

    def op_create_database(self) -> dict[str, Any]:
        """The database as Bloom builds one (`bloom db build`): TapDB's schema applied and
        migrated by TapDB's own CLI, then Bloom's template seeding."""
        from bloom_lims.cli.db import _seed_tapdb_templates

        self.tapdb_cli("db", "schema", "apply", ENV)
        self.tapdb_cli("db", "schema", "migrate", ENV)
        _seed_tapdb_templates(ENV)
        return self.counts()

    def op_attach_database(self, full: bool = False) -> dict[str, Any]:
        """A TapDB another writer created (bloomops): add only what Bloom cannot work
        without, through Bloom's own seeding: its identity-prefix rows (owner repo `bloom`),
        the templates of its pack whose semantic code the database lacks, and its action
        templates, which Bloom finds only under its own category (BAC) whatever else is
        there. The templates the database has (queue, lease, execution record, hold, dead
        letter, worker) Bloom uses as they are. ``full``: Bloom's `bloom db seed` as it is,
        which adds its whole pack whatever the database has. Returns what was there, what
        was added and which of Bloom's codes were left to the database's own templates."""
        from bloom_lims.cli import db as bloom_db
        from bloom_lims.domain.execution_actions import EXECUTION_ACTION_TEMPLATE_PREFIX

        before, have, skipped = self.counts(), self.template_codes(), []
        validate = bloom_db.validate_template_configs

        def lacking(dirs: list[Path], strict: bool = True):
            templates, issues = validate(dirs, strict=strict)
            keep = []
            for tpl in templates:
                semantic = (tpl.get("json_addl") or {}).get("semantic_category") or tpl["category"]
                code = f"{semantic}/{tpl['type']}/{tpl['subtype']}/{tpl['version']}"
                if code in have and tpl.get("instance_prefix") != EXECUTION_ACTION_TEMPLATE_PREFIX:
                    skipped.append(code)
                else:
                    keep.append(tpl)
            return keep, issues

        if not full:
            bloom_db.validate_template_configs = lacking
        try:
            bloom_db._seed_tapdb_templates(ENV)
        finally:
            bloom_db.validate_template_configs = validate
        return {"before": before, "after": self.counts(), "left_to_database": sorted(skipped)}

    def template_codes(self) -> set[str]:
        from sqlalchemy import text

        svc = self.service()
        try:
            return {code for (code,) in svc.bdb.session.execute(text(
                "SELECT coalesce(json_addl->>'semantic_category', category) || '/' || type"
                " || '/' || subtype || '/' || version FROM generic_template"
                " WHERE NOT is_deleted"))}
        finally:
            self.done(svc)

    def counts(self) -> dict[str, Any]:
        from sqlalchemy import text

        svc = self.service()
        try:
            return dict(svc.bdb.session.execute(text(
                "SELECT (SELECT count(*) FROM generic_template) AS templates,"
                " (SELECT count(*) FROM generic_instance) AS instances,"
                " (SELECT json_agg(json_build_array(entity, issuer_app_code, prefix)"
                "         ORDER BY issuer_app_code, entity)"
                "    FROM tapdb_identity_prefix_config) AS prefixes")).mappings().one())
        finally:
            self.done(svc)

    # -- the clock ------------------------------------------------------------------------

    def op_set_clock(self, now: str) -> str:
        self.now = datetime.fromisoformat(now.replace("Z", "+00:00")).astimezone(UTC)
        return self.now.isoformat()

    def op_advance_clock(self, seconds: float) -> str:
        self.now += timedelta(seconds=seconds)
        return self.now.isoformat()

    # -- Bloom's service ------------------------------------------------------------------

    def service(self):
        """Bloom's service on a session of its own, as each of Bloom's API calls makes one
        (one engine is kept for the driver's life instead of one per call)."""
        from bloom_lims.domain.execution_queue import ExecutionQueueService
        from bloom_lims.tapdb_adapter import BLOOMdb3

        if self.bdb is None:
            self.bdb = BLOOMdb3(app_username="bloom-interop")
        else:
            self.bdb.session = self.bdb.new_session()
        return ExecutionQueueService(app_username="bloom-interop", bdb=self.bdb,
                                     clock=self.clock)

    @staticmethod
    def done(svc) -> None:
        """End a call: a read's uncommitted writes are rolled back, as Bloom's API does."""
        svc.bdb.session.rollback()
        svc.bdb.session.close()

    def op_create_subject(self, template_code: str, name: str | None = None,
                          properties: dict[str, Any] | None = None) -> dict[str, Any]:
        """A subject through Bloom's object layer (no execution envelope yet)."""
        svc = self.service()
        try:
            obj = svc.bobj.create_instance_by_code(
                template_code, {"json_addl": {"properties": dict(properties or {})}})
            if name:
                obj.name = name
                svc.bdb.session.commit()
            return {"euid": obj.euid, "name": obj.name, "template_code": template_code}
        finally:
            self.done(svc)

    def op_create_routed_subjects(self, template_code: str, queue_key: str, count: int,
                                  priorities: list[int] | None = None) -> dict[str, Any]:
        """Many subjects at once, for measurements: each created through Bloom's object layer
        with the envelope Bloom's intake (``queue_subject``) leaves, READY for ``queue_key``."""
        from bloom_lims.schemas.execution_queue import ExecutionEnvelope

        cycle = priorities or [0]
        svc = self.service()
        try:
            for i in range(count):
                envelope = ExecutionEnvelope(state="READY", next_queue_key=queue_key,
                                             priority=cycle[i % len(cycle)]).model_dump(mode="json")
                envelope["queue_cache"] = {"current_queue_key": queue_key,
                                           "computed_at": svc._timestamp()}
                svc.bobj.create_instance_by_code(template_code, {"json_addl": {"properties": {
                    "execution": envelope, "current_queue": queue_key}}})
            return {"created": count}
        finally:
            self.done(svc)

    def op_actions_on(self, euid: str) -> list[dict[str, Any]]:
        """The action records executed on an object (lineage ``executed_on``), loaded by
        Bloom's object layer as its history views load them, oldest first."""
        from bloom_lims.db import get_child_lineages

        svc = self.service()
        try:
            out = []
            for lineage in get_child_lineages(svc._require_instance(euid)):
                if lineage.is_deleted or lineage.relationship_type != "executed_on":
                    continue
                action, body = lineage.parent_instance, lineage.parent_instance.json_addl or {}
                out.append({"euid": action.euid, "uid": action.uid, "class": type(action).__name__,
                            "type": action.type, "action_key": action.subtype,
                            **{k: body.get(k) for k in ("executed_by", "executed_at",
                                                        "subject_lookup_euid", "result")}})
            return sorted(out, key=lambda a: a["uid"])
        finally:
            self.done(svc)

    def op_queue_subject(self, **fields: Any) -> Any:
        fields.setdefault("idempotency_key", uuid.uuid4().hex)
        fields.setdefault("next_action_key", None)
        return self.call("queue_subject", None, executed_by="bloom-interop", **fields)

    def call(self, method: str, request: Any, **kwargs: Any) -> Any:
        svc = self.service()
        try:
            args = (request,) if request is not None else ()
            return getattr(svc, method)(*args, **kwargs)
        finally:
            self.done(svc)


def to_json(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def run_op(driver: Driver, op: dict[str, Any]) -> Any:
    """The driver's own operation ``op_<name>``, else the service method ``<name>``: an
    action with its request model (``claim_queue_item`` -> ``ClaimQueueItemRequest``), or a
    read with its keyword arguments."""
    from bloom_lims.domain.execution_queue import ExecutionQueueService
    from bloom_lims.schemas import execution_queue as schemas

    fields = dict(op)
    name = fields.pop("op")
    own = getattr(driver, f"op_{name}", None)
    if own is not None:
        return own(**fields)
    if name.startswith("_") or not callable(getattr(ExecutionQueueService, name, None)):
        raise ValueError(f"unknown operation {name!r}")
    model = getattr(schemas, "".join(p.title() for p in name.split("_")) + "Request", None)
    if model is None:
        return driver.call(name, None, **fields)
    if "idempotency_key" in model.model_fields:
        fields.setdefault("idempotency_key", uuid.uuid4().hex)
    executed_by = fields.pop("executed_by", "bloom-interop")
    return driver.call(name, model(**fields), executed_by=executed_by)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    # The protocol owns the real stdout; whatever Bloom or TapDB print goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    host, port = cfg.get("host") or "localhost", int(cfg.get("port") or 5432)
    if host.startswith("/"):
        config_port = Bridge(str(Path(host) / f".s.PGSQL.{port}")).port
    elif host != "localhost":
        config_port = Bridge((host, port)).port
    else:
        config_port = port
    write_bloom_config(cfg, config_port)
    if config_port != port:
        route_connections(host, port)
    driver = Driver(cfg)
    out.write(json.dumps({"ready": True, "python": sys.version.split()[0]}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        results = []
        for op in json.loads(line)["ops"]:
            started = time.perf_counter()
            try:
                value = to_json(run_op(driver, op))
                results.append({"ok": True, "result": value,
                                "ms": round((time.perf_counter() - started) * 1000, 2)})
            except Exception as exc:  # noqa: BLE001 - every failure is reported to the caller
                results.append({"ok": False, "error": {
                    "type": type(exc).__name__, "message": str(exc),
                    "traceback": traceback.format_exc(limit=6)}})
        out.write(json.dumps({"results": results}, default=str) + "\n")


if __name__ == "__main__":
    main()
