"""The hash chain of action records (RULES.md#evidence): every record is sealed with the
sha256 of its canonical content, which includes the hash of the previous record on the same
target, so changing or removing a past record breaks the chain from there on.

The canonical form (also the evidence bundle's) is one of JSON: UTF-8, object keys sorted by
code point, no insignificant whitespace, no NaN/Infinity; an integral number is written as an
integer (``2``, never ``2.0`` or ``2e0``) and any other number as the shortest decimal that
reads back as the same double. PostgreSQL's jsonb keeps numbers by value, not by spelling, so
this is the form whose hash survives a round trip through the database.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from bloomops.execution.objects import save_record_seal
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.db import fetch_all, fetch_one

CHAIN = "chain"
# Every action record is a TapDB instance of type execution_queue (subtype = action key).
RECORDS = "tenant_id = %(tenant)s AND type = 'execution_queue'"


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("NaN and Infinity have no canonical form")
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        if "e" in repr(value) and abs(value) >= 1:
            # PostgreSQL keeps 6.02e+23 as the number its digits spell and gives it back as
            # 602000000000000000000000: sealed as the float, the record read as tampered
            return int(Decimal(repr(value)))
        return value
    if isinstance(value, dict):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return value


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON of a value (module docstring)."""
    return json.dumps(_normal(value), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# What a chain entry holds that seals the rest: left out of the content hashed, so a record
# written before the seal key can be keyed later without changing its sha256.
KEYED = ("hmac", "key_id")
SEALS = ("sha256", *KEYED)


def content_hash(json_addl: dict[str, Any]) -> str:
    """sha256 of a record's stored JSON without its own seal (the chain's sha256)."""
    body = dict(json_addl)
    body[CHAIN] = {k: v for k, v in (body.get(CHAIN) or {}).items() if k not in SEALS}
    return sha256_hex(canonical_bytes(body))


# The keyed seal (RULES.md#evidence): anyone can recompute a sha256, so an insider with the
# database alone could edit a record and re-seal the chain after it. The HMAC of each seal,
# with a key the database does not hold (settings.BLOOMOPS_SEAL_KEYS), cannot be remade
# without that key.
def _key_id(key: str) -> str:
    return hashlib.sha256(f"bloomops-seal-key|{key}".encode()).hexdigest()[:16]


def _keyed(key: str, sha256: str) -> str:
    return hmac.new(key.encode(), sha256.encode(), hashlib.sha256).hexdigest()


def keyed_problem(entry: dict[str, Any]) -> str | None:
    """What is wrong with a chain entry's keyed seal (its sha256 already checked), or None."""
    keys = {_key_id(k): k for k in settings.BLOOMOPS_SEAL_KEYS}
    if "hmac" not in entry:
        return ("carries no keyed seal: re-sealed outside bloomops, or written before the"
                " seal key (`manage.py key_chains` keys only records older than the first"
                " keyed one)")
    # any JSON may stand here (a file, another writer): a key id is text or names no key
    key_id = entry.get("key_id")
    key = keys.get(key_id) if isinstance(key_id, str) else None
    if key is None:
        return (f"is sealed with a key this server does not hold (key id"
                f" {entry.get('key_id')!r}): re-sealed outside bloomops, or the key is not"
                " in BLOOMOPS_SEAL_KEYS")
    if not hmac.compare_digest(str(entry["hmac"]), _keyed(key, str(entry.get("sha256")))):
        return "its keyed seal does not match its sha256: re-sealed outside bloomops"
    return None


def with_keyed_seal(entry: dict[str, Any]) -> dict[str, Any]:
    """A chain entry whose sha256 is set, with the keyed seal of the server's first key."""
    key = settings.BLOOMOPS_SEAL_KEYS[0]
    return {**entry, "key_id": _key_id(key), "hmac": _keyed(key, entry["sha256"])}


# The envelope's seal (RULES.md#evidence): a chain's newest record names no next one, so
# its removal, or its disguise as another writer's, left the chains whole. The executor
# keys every envelope it writes, and the record of that action keeps the same seal; one
# without the key cannot make a seal for an envelope of their own.
ENVELOPE_SEAL = "seal"


def _envelope_digest(tenant: str | None, euid: str, env: dict[str, Any]) -> str:
    body = {k: v for k, v in env.items() if k != ENVELOPE_SEAL}
    return sha256_hex(canonical_bytes({"tenant": tenant, "subject": euid, "envelope": body}))


def envelope_seal(tenant: str | None, euid: str, env: dict[str, Any]) -> str:
    """The seal of subject ``euid``'s envelope ``env`` under the server's first key."""
    key = settings.BLOOMOPS_SEAL_KEYS[0]
    return f"{_key_id(key)}:{_keyed(key, _envelope_digest(tenant, euid, env))}"


def envelope_sealed(tenant: str | None, euid: str, env: dict[str, Any]) -> bool:
    """Whether ``env`` is still the envelope its seal was made for, under a key held."""
    seal_ = env.get(ENVELOPE_SEAL)
    if not isinstance(seal_, str) or ":" not in seal_:
        return False
    key_id, mac = seal_.split(":", 1)
    key = {_key_id(k): k for k in settings.BLOOMOPS_SEAL_KEYS}.get(key_id)
    try:
        digest = _envelope_digest(tenant, euid, env)
    except (TypeError, ValueError):  # another writer's value no canonical form holds
        return False
    return key is not None and hmac.compare_digest(mac, _keyed(key, digest))


def seal(tenant: str | None, key: str, json_addl: dict[str, Any]) -> dict[str, Any]:
    """The chain entry of a record about to be written on target ``key``.

    Actions on one subject already serialise on its row lock, but a worker's, a lease's or a
    target-less action's do not always lock a row first; the transaction-scoped advisory lock
    on the chain key makes "the previous record" one record for every writer. It is taken last
    (after the handler's row locks), held to commit, and the read after it is a new statement,
    so it sees the previous holder's committed record."""
    sql_execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"chain|{tenant}|{key}"])
    prev = fetch_one(
        f"""SELECT euid, json_addl->'{CHAIN}'->>'sha256' AS sha256 FROM generic_instance
        WHERE {RECORDS} AND json_addl->'{CHAIN}'->>'key' = %(key)s
        ORDER BY uid DESC LIMIT 1""",
        {"tenant": tenant, "key": key},
        prepare="chain_previous",
    )
    entry = {"key": key, "previous_euid": prev["euid"] if prev else None,
             "previous_sha256": prev["sha256"] if prev else None}
    entry["sha256"] = content_hash({**json_addl, CHAIN: entry})
    return with_keyed_seal(entry)


def sealed_on(tenant: str | None, key: str, action_key: str) -> list[dict[str, Any]]:
    """The records of ``action_key`` on ``key``'s chain, oldest first, each with ``intact``:
    whether its content still matches its seal, keyed with a key this server holds (what
    a decision may rely on, where the object the action made is a snapshot any writer of the
    database can rewrite). One query, through the chain's index."""
    rows = fetch_all(
        f"""SELECT uid, euid, json_addl FROM generic_instance
        WHERE {RECORDS} AND subtype = %(action)s AND NOT is_deleted
          AND json_addl->'{CHAIN}'->>'key' = %(key)s ORDER BY uid""",
        {"tenant": tenant, "key": key, "action": action_key})
    for row in rows:
        row["intact"] = seal_intact(row["json_addl"])
    return rows


def seal_intact(body: dict[str, Any]) -> bool:
    """Whether a record's content still matches its seal, keyed with a key this server
    holds."""
    entry = body.get(CHAIN)
    return (isinstance(entry, dict) and content_hash(body) == entry.get("sha256")
            and keyed_problem(entry) is None)


@dataclass
class Break:
    """The first broken link of one chain: which record and what differs."""

    key: str
    record_euid: str  # the record named, or the object (``what``) when no record is left
    problem: str
    what: str = "record"

    def __str__(self) -> str:
        return (f"chain {self.key or '(no target)'}: {self.what} {self.record_euid}:"
                f" {self.problem}")


@dataclass
class ChainReport:
    chains: int
    records: int
    breaks: list[Break]

    @property
    def ok(self) -> bool:
        return not self.breaks


def written_by_bloomops(body: Any) -> bool:
    """A record bloomops' executor wrote (journal.record_action: no other writer keeps an
    idempotency scope and a target), not the benchmark's unsealed filler."""
    return (isinstance(body, dict) and "idempotency_scope" in body and "target_euid" in body
            and "bench_history_uid" not in body)


def another_writers(body: Any) -> bool:
    """A record another writer (Bloom) made of an action: unsealed, not bloomops' shape, and
    saying what was done, on what, when. Every check that lets another writer's work stand
    as later history asks this one question; an empty row is no one's action."""
    return (not written_by_bloomops(body) and isinstance(body, dict)
            and all(isinstance(body.get(k), str) and body[k].strip()
                    for k in ("action_key", "target_euid", "executed_at")))


def sealed_record(body: Any) -> bool:
    """A record carrying a chain entry: bloomops' (its seal checked by the walk)."""
    return isinstance(body, dict) and isinstance(body.get(CHAIN), dict)


def _first_sealed(tenant: str | None) -> int | None:
    """uid of the tenant's first sealed record: every record bloomops wrote after it was
    sealed, so one of its records without a seal after it had its seal removed."""
    row = fetch_one(f"SELECT uid FROM generic_instance WHERE {RECORDS} AND json_addl ?"
                    f" '{CHAIN}' ORDER BY uid LIMIT 1", {"tenant": tenant})
    return row["uid"] if row else None


def _first_break(key: str, rows: list[dict[str, Any]], keyed: bool = True,
                 sealed_since: int | None = None) -> Break | None:
    prev: dict[str, Any] | None = None
    # Records without a seal are in no chain: written before it existed, or by another writer
    # of the shared database. One of ours written after the first seal had it removed (the
    # newest of a chain has no next link to name it); any other is found by the next link.
    unsealed: set[str] = set()
    for row in rows:
        body = row["json_addl"] or {}
        entry = body.get(CHAIN)
        if not isinstance(entry, dict):
            if (sealed_since is not None and row["uid"] > sealed_since
                    and written_by_bloomops(body)):
                return Break(key, row["euid"], "carries no chain entry (its seal was removed)")
            unsealed.add(row["euid"])
            continue
        if row["is_deleted"]:
            return Break(key, row["euid"], "is marked deleted")
        computed = content_hash(body)
        if computed != entry.get("sha256"):
            return Break(key, row["euid"], "content differs from its seal: stored sha256 "
                         f"{entry.get('sha256')}, content hashes to {computed}")
        if keyed and (problem := keyed_problem(entry)):
            return Break(key, row["euid"], problem)
        if row["subtype"] != body.get("action_key"):
            # the column every list of actions is read by is not in the seal
            return Break(key, row["euid"], f"is stored as an action {row['subtype']!r}, but"
                         f" sealed as {body.get('action_key')!r}: renamed outside bloomops")
        want = (prev["euid"], prev["json_addl"][CHAIN].get("sha256")) if prev else (None, None)
        named = (entry.get("previous_euid"), entry.get("previous_sha256"))
        if not isinstance(named[0], str | None):
            return Break(key, row["euid"], "names no record as its previous"
                         f" ({json.dumps(named[0], default=str)[:80]})")
        if named != want:
            if named[0] in unsealed:
                return Break(key, named[0], "carries no chain entry (its seal was removed)")
            if prev is None or named[0] != want[0]:
                return Break(key, row["euid"], f"names previous record {named[0]}, but the"
                             f" chain's previous record is {want[0]} (a record was removed"
                             " or moved)")
            return Break(key, row["euid"], f"names previous sha256 {named[1]}, but"
                         f" {want[0]} is sealed with {want[1]} (that record was re-sealed)")
        prev = row
    return None


def walk_chains(tenant: str | None, key: str | list[str] | None = None, *,
                  keyed: bool = True) -> ChainReport:
    """Walk one chain (target euid), several, or every chain of the tenant in record order,
    naming each broken chain's first broken link; without ``keyed``, the keyed seals are not
    checked (key_chains, before it adds them). What the objects' state says of their records
    besides is `verification.verify_chains`'."""
    keys = [key] if isinstance(key, str) else key
    columns = (f"uid, euid, subtype, is_deleted, json_addl, coalesce(json_addl->'{CHAIN}'->>'key',"
               " json_addl->>'target_euid', '') AS chain_key")
    # Some targets': their sealed records and, apart (each through its own index; an OR of
    # the two read every record of the tenant on each view of a subject), their unsealed
    # ones, so the walk names one whose seal was stripped.
    sql = f"""SELECT * FROM (
        SELECT {columns} FROM generic_instance
        WHERE {RECORDS} AND json_addl->'{CHAIN}'->>'key' = ANY(%(keys)s)
        UNION ALL
        SELECT {columns} FROM generic_instance
        WHERE {RECORDS} AND NOT json_addl ? '{CHAIN}'
          AND json_addl->>'target_euid' = ANY(%(keys)s)
        ) r ORDER BY uid""" if keys is not None else (
        f"SELECT {columns} FROM generic_instance WHERE {RECORDS} ORDER BY uid")
    rows = fetch_all(sql, {"tenant": tenant, "keys": keys})
    by_key: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault(row["chain_key"], []).append(row)
    since = _first_sealed(tenant)
    breaks = [b for k, rs in by_key.items()
              if (b := _first_break(k, rs, keyed, since)) is not None]
    return ChainReport(chains=len(by_key), records=len(rows), breaks=breaks)


def key_chains(tenant: str | None) -> int:
    """Give every sealed record without a keyed seal one, once every chain of the tenant
    verifies without them (a deployment that had records before its seal key). Returns how
    many were keyed; refuses (ValueError naming the breaks) while any chain is broken."""
    report = walk_chains(tenant, keyed=False)
    if report.breaks:
        raise ValueError("; ".join(str(b) for b in report.breaks))
    # Only records older than the first keyed one can be from before the key: an unkeyed
    # record after it was re-sealed without the key, and keying it would launder the edit.
    first = fetch_one(f"""SELECT min(uid) AS uid FROM generic_instance
        WHERE {RECORDS} AND json_addl->'{CHAIN}' ? 'hmac'""", {"tenant": tenant})["uid"]
    rows = fetch_all(f"""SELECT uid, euid, json_addl->'{CHAIN}' AS entry FROM generic_instance
        WHERE {RECORDS} AND json_addl ? '{CHAIN}' AND NOT json_addl->'{CHAIN}' ? 'hmac'
        ORDER BY uid""", {"tenant": tenant})
    late = [r["euid"] for r in rows if first is not None and r["uid"] > first]
    if late:
        raise ValueError(f"{len(late)} record(s) written after the seal key carry no keyed"
                         f" seal (first {late[0]}): re-sealed outside bloomops")
    for row in rows:
        save_record_seal(row["uid"], CHAIN, with_keyed_seal(row["entry"]))
    return len(rows)
