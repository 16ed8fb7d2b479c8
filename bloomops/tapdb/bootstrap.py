"""Idempotent TapDB bootstrap: schema, identity prefixes, template packs, and the read
indexes the domain hands over.

Each step first looks at what is there and only writes what is missing, so a second
run reports "nothing changed" and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from bloomops.tapdb import templates as template_cache
from bloomops.tapdb.db import execute, fetch_all, fetch_value
from bloomops.tapdb.roles import ensure_runtime_role

PACK_DIR = Path(__file__).resolve().parent / "packs"

# TapDB's own prefixes for its identity tables (as its `db setup` configures them).
IDENTITY_PREFIXES = {
    "generic_template": "TPX",
    "generic_instance_lineage": "EDG",
    "audit_log": "ADT",
}

@dataclass
class BootstrapReport:
    schema_applied: bool = False
    schema_foreign: bool = False
    prefixes_added: list[str] = field(default_factory=list)
    sequences_created: list[str] = field(default_factory=list)
    templates_inserted: list[str] = field(default_factory=list)
    templates_updated: list[str] = field(default_factory=list)
    # Codes another writer seeded first: used as they are, not seeded again.
    templates_foreign: list[str] = field(default_factory=list)
    indexes_created: list[str] = field(default_factory=list)
    runtime_role_changes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(
            [
                self.schema_applied,
                self.prefixes_added,
                self.sequences_created,
                self.templates_inserted,
                self.templates_updated,
                self.indexes_created,
                self.runtime_role_changes,
            ]
        )

    def lines(self) -> list[str]:
        if not self.changed:
            return ["TapDB bootstrap: everything already in place; nothing changed."]
        out = ["TapDB bootstrap:"]
        out.append("  schema: " + ("applied" if self.schema_applied else
                                   "another writer's, used as it is" if self.schema_foreign
                                   else "already current"))
        out.append(f"  identity prefixes added: {len(self.prefixes_added)}")
        out.append(f"  sequences created: {len(self.sequences_created)}")
        out.append(
            f"  templates inserted: {len(self.templates_inserted)},"
            f" updated: {len(self.templates_updated)}"
            + (f", another writer's kept: {len(self.templates_foreign)}"
               if self.templates_foreign else "")
        )
        out.append(f"  indexes created: {len(self.indexes_created)}")
        out.append(f"  runtime role grants changed: {len(self.runtime_role_changes)}")
        return out


def schema_file() -> Path:
    """The DDL shipped as a data file of the installed daylily-tapdb wheel."""
    path = Path(sysconfig.get_paths()["data"]) / "schema" / "tapdb_schema.sql"
    if not path.exists():
        raise FileNotFoundError(f"daylily-tapdb schema not found at {path}; is it installed?")
    return path


def _schema_marker(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return f"bloomops:tapdb_schema.sql:{digest}"


def apply_schema(report: BootstrapReport) -> None:
    path = schema_file()
    marker = _schema_marker(path)
    present = fetch_value("SELECT to_regclass('_tapdb_migrations') IS NOT NULL")
    if present and fetch_value(
        "SELECT count(*) FROM _tapdb_migrations WHERE filename = %s", [marker]
    ):
        return
    if fetch_value("SELECT to_regclass('generic_instance') IS NOT NULL"):
        # Another writer (Bloom, TapDB's own CLI) made this database: its schema is used as
        # it is, never re-applied over it.
        report.schema_foreign = True
        return
    with connection.cursor() as cursor:
        cursor.execute(path.read_text())
    # Baseline TapDB's own migrations, as its `db setup` does, so its tools never re-apply them.
    migrations = sorted((path.parent / "migrations").glob("*.sql"))
    for name in [m.name for m in migrations] + [marker]:
        execute(
            "INSERT INTO _tapdb_migrations (filename) VALUES (%s) ON CONFLICT DO NOTHING", [name]
        )
    report.schema_applied = True


def load_packs() -> list[dict]:
    import jsonschema

    schema_path = (
        Path(__import__("daylily_tapdb").__file__).parent
        / "templates"
        / "schema"
        / "template-pack.schema.json"
    )
    schema = json.loads(schema_path.read_text())
    out: list[dict] = []
    for pack in sorted(PACK_DIR.glob("*.json")):
        data = json.loads(pack.read_text())
        jsonschema.validate(data, schema)
        out.extend(data["templates"])
    return out


def _ensure_sequence(prefix: str, report: BootstrapReport) -> None:
    seq = f"{prefix.lower()}_instance_seq"
    if not fetch_value("SELECT to_regclass(%s) IS NOT NULL", [seq]):
        execute(f'CREATE SEQUENCE IF NOT EXISTS "{seq}"')
        report.sequences_created.append(seq)


def ensure_identity(report: BootstrapReport, packs: list[dict]) -> None:
    domain, owner = settings.TAPDB_DOMAIN_CODE, settings.TAPDB_OWNER_REPO_NAME
    for entity, prefix in IDENTITY_PREFIXES.items():
        inserted = execute(
            """
            INSERT INTO tapdb_identity_prefix_config (entity, domain_code, issuer_app_code, prefix)
            VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING
            """,
            [entity, domain, owner, prefix],
        )
        if inserted:
            report.prefixes_added.append(entity)
    for prefix in sorted(set(IDENTITY_PREFIXES.values()) | {t["instance_prefix"] for t in packs}):
        _ensure_sequence(prefix, report)


def seed_templates(report: BootstrapReport, packs: list[dict]) -> None:
    """Seed each template of our packs whose semantic code no template has yet. A code that
    another writer (Bloom) seeded is used as it is and never rewritten; our own rows (same
    category) follow the pack."""
    rows = fetch_all(
        "SELECT uid, category, type, subtype, version, json_addl, name FROM generic_template"
        " WHERE NOT is_deleted ORDER BY uid"
    )
    by_code: dict[str, dict] = {}
    for r in rows:
        semantic = (r["json_addl"] or {}).get("semantic_category") or r["category"]
        by_code.setdefault(f"{semantic}/{r['type']}/{r['subtype']}/{r['version']}", r)
    for tpl in packs:
        semantic = tpl["json_addl"]["semantic_category"]
        code = f"{semantic}/{tpl['type']}/{tpl['subtype']}/{tpl['version']}"
        row = by_code.get(code)
        if row is not None and row["category"] != tpl["category"]:
            report.templates_foreign.append(code)
            continue
        if row is None:
            execute(
                """
                INSERT INTO generic_template
                    (euid, euid_prefix, euid_seq, name, polymorphic_discriminator, category,
                     type, subtype, version, instance_prefix, instance_polymorphic_identity,
                     json_addl, bstatus, is_singleton)
                VALUES ('', '', 0, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s)
                """,
                [
                    tpl["name"],
                    tpl["polymorphic_discriminator"],
                    tpl["category"],
                    tpl["type"],
                    tpl["subtype"],
                    tpl["version"],
                    tpl["instance_prefix"],
                    tpl.get("instance_polymorphic_identity"),
                    json.dumps(tpl.get("json_addl", {})),
                    tpl.get("bstatus", "active"),
                    tpl.get("is_singleton", False),
                ],
            )
            report.templates_inserted.append(code)
        elif row["json_addl"] != tpl.get("json_addl", {}) or row["name"] != tpl["name"]:
            execute(
                "UPDATE generic_template SET json_addl = %s::jsonb, name = %s WHERE uid = %s",
                [json.dumps(tpl.get("json_addl", {})), tpl["name"], row["uid"]],
            )
            report.templates_updated.append(code)


class BootstrapError(RuntimeError):
    """What the database holds stops bootstrap; the message says what and where."""


def _create(name: str, ddl: str) -> None:
    """A unique index over rows another writer left duplicated (two queues of one key) cannot
    be built: say which rows, so that they can be put right, instead of a bare IntegrityError."""
    try:
        with transaction.atomic():
            execute(ddl)
    except IntegrityError as exc:
        detail = getattr(exc.__cause__, "diag", None)
        raise BootstrapError(
            f"{name}: two live objects hold what must be one object's"
            f" ({getattr(detail, 'message_detail', None) or exc}). Mark all but one deleted"
            " (is_deleted) or give it another key, then run this again.") from exc


def ensure_indexes(report: BootstrapReport, read_indexes: Mapping[str, str],
                   retired: Sequence[tuple[str, str]]) -> None:
    """Create the read indexes the domain hands over (name -> DDL) that are missing, and drop
    the ones it retired ((INDEX or STATISTICS, name))."""
    have = {r["indexname"] for r in fetch_all("SELECT indexname FROM pg_indexes")}
    have |= {r["stxname"] for r in fetch_all("SELECT stxname FROM pg_statistic_ext")}
    # A function is in place when its body is the one handed over; CREATE OR REPLACE keeps
    # the indexes built on it (a new body must give the same results). Sessions opened before
    # keep the old body inlined in those indexes' expressions until they reconnect (the
    # deployment restarts them: docs/DEPLOY.md).
    bodies = {r["proname"]: r["prosrc"] for r in fetch_all(
        "SELECT proname, prosrc FROM pg_proc WHERE pronamespace = 'public'::regnamespace")}
    for name, ddl in read_indexes.items():
        body = ddl.split("$$")[1] if ddl.count("$$") == 2 else None
        in_place = (bodies.get(name, "").strip() == body.strip() if body is not None
                    else name in have)
        if not in_place:
            _create(name, ddl)
            report.indexes_created.append(name)
    have |= set(bodies)
    for kind, name in retired:
        if name in have:
            execute(f"DROP {kind} IF EXISTS {name}")
            report.indexes_created.append(f"-{name}")


def bootstrap(*, read_indexes: Mapping[str, str] | None = None,
              retired: Sequence[tuple[str, str]] = ()) -> BootstrapReport:
    """TapDB's schema, prefixes and template packs; and the read indexes a higher layer
    hands over (the domain defines them: see bloomops.execution.indexes)."""
    report = BootstrapReport()
    packs = load_packs()
    with transaction.atomic():
        # One bootstrap at a time (make run and make test may race on a shared server).
        execute("SELECT pg_advisory_xact_lock(hashtext('bloomops-bootstrap'))")
        apply_schema(report)
        ensure_identity(report, packs)
        seed_templates(report, packs)
        ensure_indexes(report, read_indexes or {}, retired)
        # Last: the role's grants cover the tables and sequences made above.
        report.runtime_role_changes = ensure_runtime_role()
    template_cache.clear_cache()
    if report.changed:
        execute("ANALYZE generic_template")
        if report.indexes_created:
            execute("ANALYZE generic_instance")
    return report
