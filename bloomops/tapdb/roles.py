"""The runtime database role (docs/DEPLOY.md): created and granted by the owner, idempotently.

The web server and the workers connect as this role. It may read and write what the engine
writes through TapDB (instances, lineage, the outbox) and Django's own tables, only read
templates and configuration, and only append to audit_log; it owns nothing, so it can neither
alter a table nor disable TapDB's audit triggers. TapDB's trigger functions run with the
privileges of the caller, so the grants cover what they do too: nextval on the EUID
sequences, SELECT on tapdb_identity_prefix_config, INSERT into audit_log.

Applied by bootstrap_tapdb and after every migrate (new Django tables); each run grants only
what is missing and revokes what is not wanted, so a second run changes nothing.
"""

from __future__ import annotations

import os
import re

from django.conf import settings
from django.core.checks import Warning as CheckWarning
from django.db import connection, transaction
from django.db.utils import ProgrammingError

from bloomops.tapdb.db import execute, fetch_all, fetch_value

DML = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE"})
# TapDB's tables; any table not named here and not Django's gets nothing.
TAPDB_GRANTS: dict[str, frozenset[str]] = {
    "generic_template": frozenset({"SELECT"}),
    "tapdb_identity_prefix_config": frozenset({"SELECT"}),
    "generic_instance": frozenset({"SELECT", "INSERT", "UPDATE"}),
    "generic_instance_lineage": frozenset({"SELECT", "INSERT", "UPDATE"}),
    "audit_log": frozenset({"SELECT", "INSERT"}),
    "outbox_event": frozenset({"SELECT", "INSERT", "UPDATE"}),
    "outbox_event_attempt": frozenset({"SELECT", "INSERT", "UPDATE"}),
}
# Django's migration ledger: read (Django checks it), never written at run time.
READ_ONLY_DJANGO = frozenset({"django_migrations"})
# Audit trails of our own: read and appended, never rewritten (docs/ARCHITECTURE.md).
APPEND_ONLY_DJANGO = frozenset({"accounts_profilechange"})
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class RuntimeRoleError(RuntimeError):
    pass


def runtime_role() -> str | None:
    """The runtime role's name, or None when it is the owner itself (one role for all)."""
    name = settings.DATABASE_ROLES["runtime"]["USER"]
    if not name or name == settings.DATABASE_ROLES["owner"]["USER"]:
        return None
    if not _ROLE_NAME.fullmatch(name):
        raise RuntimeRoleError(f"runtime role name {name!r}: use lower-case letters, digits, _")
    return name


def check_separate_runtime_role(app_configs=None, **kwargs) -> list[CheckWarning]:
    """`check --deploy`: the server should not connect as the owner of the schema, neither
    by one URL for both roles nor by BLOOMOPS_DB_ROLE=owner in its environment."""
    forced = os.environ.get("BLOOMOPS_DB_ROLE", "").strip().lower() == "owner"
    if not forced and (settings.DATABASE_ROLES["runtime"]["USER"]
                       != settings.DATABASE_ROLES["owner"]["USER"]):
        return []
    return [CheckWarning(
        "The web server and the workers connect as the database owner, so they could rewrite"
        " audit_log and alter TapDB's tables.",
        hint="Set BLOOMOPS_RUNTIME_DATABASE_URL to a role with data privileges only"
             " (docs/DEPLOY.md).",
        id="bloomops.W001")]


def wanted_grants() -> dict[str, frozenset[str]]:
    """Table privileges of the runtime role, for the tables that exist now."""
    django_tables = set(connection.introspection.django_table_names(only_existing=True))
    wanted = dict(TAPDB_GRANTS)
    for table in django_tables - set(TAPDB_GRANTS):
        wanted[table] = DML
    for table in READ_ONLY_DJANGO:
        wanted[table] = frozenset({"SELECT"})
    for table in APPEND_ONLY_DJANGO & django_tables:
        wanted[table] = frozenset({"SELECT", "INSERT"})
    return wanted


def ensure_runtime_role() -> list[str]:
    """Create the runtime role if missing and bring its grants to exactly what it needs.
    Returns what changed (empty when nothing did)."""
    role = runtime_role()
    if role is None or connection.vendor != "postgresql":
        return []
    changes: list[str] = []
    with transaction.atomic():
        execute("SELECT pg_advisory_xact_lock(hashtext('bloomops-runtime-role'))")
        if _create_role(role):
            changes.append(f"role {role} created")
        changes += _sync_table_grants(role)
        changes += _sync_schema_grants(role)
    return changes


def _create_role(role: str) -> bool:
    if fetch_value("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]):
        return False
    password = settings.DATABASE_ROLES["runtime"]["PASSWORD"] or None
    try:
        with transaction.atomic():
            execute(f'CREATE ROLE "{role}" LOGIN PASSWORD %s', [password])
    except ProgrammingError as exc:
        if getattr(exc.__cause__, "pgcode", None) == "42710":  # made meanwhile (another DB)
            return False
        raise RuntimeRoleError(
            f"cannot create the runtime role {role!r} ({exc}); create it as described in"
            " docs/DEPLOY.md, then run bootstrap_tapdb again") from exc
    return True


def _sync_table_grants(role: str) -> list[str]:
    relations = fetch_all(
        """
        SELECT c.relname, c.relkind,
               coalesce(array_agg(a.privilege_type) FILTER (WHERE a.grantee = r.oid), '{}')
                   AS privileges
        FROM pg_class c
        JOIN pg_roles r ON r.rolname = %s
        LEFT JOIN LATERAL aclexplode(c.relacl) a ON true
        WHERE c.relnamespace = current_schema()::regnamespace
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
        GROUP BY c.relname, c.relkind
        """,
        [role],
    )
    wanted = wanted_grants()
    changes: list[str] = []
    for rel in relations:
        name, have = rel["relname"], set(rel["privileges"])
        want = {"USAGE"} if rel["relkind"] == "S" else set(wanted.get(name, ()))
        kind = "SEQUENCE " if rel["relkind"] == "S" else ""
        if extra := sorted(have - want):
            execute(f'REVOKE {", ".join(extra)} ON {kind}"{name}" FROM "{role}"')
            changes.append(f"{name}: revoked {', '.join(extra)}")
        if missing := sorted(want - have):
            execute(f'GRANT {", ".join(missing)} ON {kind}"{name}" TO "{role}"')
            changes.append(f"{name}: granted {', '.join(missing)}")
    return changes


def _sync_schema_grants(role: str) -> list[str]:
    changes: list[str] = []
    if not fetch_value("SELECT has_schema_privilege(%s, current_schema(), 'USAGE')", [role]):
        execute(f'GRANT USAGE ON SCHEMA "{_schema()}" TO "{role}"')
        changes.append("schema: granted USAGE")
    # TapDB's functions (EUIDs, session identity) are callable by PUBLIC unless a DBA revoked
    # that; grant them explicitly only then.
    lacking = fetch_value(
        """
        SELECT count(*) FROM pg_proc
        WHERE pronamespace = current_schema()::regnamespace
          AND NOT has_function_privilege(%s, oid, 'EXECUTE')
        """,
        [role],
    )
    if lacking:
        execute(f'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "{_schema()}" TO "{role}"')
        changes.append(f"functions: granted EXECUTE on {lacking}")
    return changes


def _schema() -> str:
    return fetch_value("SELECT current_schema()")
