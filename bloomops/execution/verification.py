"""What verify_chain, the inspector and a bundle's verdict find wrong in the action records
(RULES.md#evidence): every chain walked (`chain.walk_chains`), and the objects whose present
state no record accounts for. A chain's newest record names no next one, so removing it
breaks no link; what the record changed still says it was there: the subject's revision, a
lease's expiry."""

from __future__ import annotations

from typing import Any

from bloomops.execution.chain import (
    CHAIN,
    ENVELOPE_SEAL,
    RECORDS,
    Break,
    ChainReport,
    envelope_sealed,
    walk_chains,
    written_by_bloomops,
)
from bloomops.execution.envelope import parse_ts_or_none
from bloomops.execution.objects import REL
from bloomops.execution.selectors.evidence import EVIDENCE_ACTION
from bloomops.tapdb.db import fetch_all


def verify_chains(tenant: str | None, key: str | list[str] | None = None, *,
                  keyed: bool = True) -> ChainReport:
    """Walk one chain (target euid), several, or every chain of the tenant, and look at the
    subjects among them (all, without a key), their leases and holds; each chain is said
    once."""
    keys = [key] if isinstance(key, str) else key
    report = walk_chains(tenant, keys, keyed=keyed)
    broken = {b.key for b in report.breaks}  # a chain is said once, at its first break
    report.breaks += [b for b in revision_gaps(tenant, keys) + lease_gaps(tenant, keys)
                      if b.key not in broken] + hold_gaps(tenant, keys)
    return report


# Every action on a subject leaves the subject's revision in its record's result (the
# executor's), one more than before when it changed the subject. Removing a chain's newest
# record breaks no link, and the next action's record then links to the one before it: the
# revisions show it, a jump of more than one between the records, or a subject later than
# its newest record left it.
_ON_SUBJECTS = """SELECT s.uid AS subject_uid, s.euid,
        s.json_addl->'properties'->'execution'->>'revision' AS revision,
        s.json_addl->'properties'->'execution' AS env, a.euid AS record_euid,
        a.json_addl AS body
    FROM generic_instance s
    JOIN generic_instance_lineage l ON l.child_instance_uid = s.uid
     AND l.relationship_type = 'executed_on' AND NOT l.is_deleted
    JOIN generic_instance a ON a.uid = l.parent_instance_uid AND a.tenant_id = %(tenant)s
     AND a.type = 'execution_queue'
    WHERE s.tenant_id = %(tenant)s AND s.json_addl->'properties' ? 'execution' {only}
    ORDER BY s.uid, a.uid"""


def _left_at(body: Any, euid: str) -> int | None:
    """The revision bloomops' record of an action on subject ``euid`` left it at."""
    if not written_by_bloomops(body) or body.get("subject_lookup_euid") != euid:
        return None
    left = (body.get("result") or {}).get("revision")
    return left if isinstance(left, int) and not isinstance(left, bool) else None


def _revision_gap(euid: str, now: Any, rows: list[dict[str, Any]]) -> Break | None:
    """The first sign in a subject's records (oldest first) that one was removed."""
    last: tuple[str, int] | None = None  # the last record's revision, while it is known
    for row in rows:
        left = _left_at(row["body"], euid)
        if left is None:
            if not written_by_bloomops(row["body"]):
                last = None  # another writer (Bloom) changed it, keeping no revision
            continue
        if last is not None and left > last[1] + 1:
            return Break(euid, row["record_euid"], f"left the subject at revision {left},"
                         f" but the record before it, {last[0]}, left it at {last[1]}: a"
                         " record between them was removed")
        if last is not None and left < last[1]:
            return Break(euid, row["record_euid"], f"left the subject at revision {left},"
                         f" but the record before it, {last[0]}, left it at {last[1]}: the"
                         " subject was set back")
        last = (row["record_euid"], left)
    if last is None or not isinstance(now, str) or not now.isdigit():
        return None
    if int(now) > last[1]:
        return Break(euid, last[0], f"is the subject's newest action record and left it at"
                     f" revision {last[1]}, but the subject is at revision {now}: a newer"
                     " record was removed, or the subject was changed without one")
    if int(now) < last[1]:
        return Break(euid, last[0], f"is the subject's newest action record and left it at"
                     f" revision {last[1]}, but the subject is at revision {now}: the"
                     " subject was set back to an earlier state without a record")
    return None


def _sealed_by(body: Any) -> str | None:
    """The envelope seal bloomops' record of an action that changed the subject left."""
    result = body.get("result") if written_by_bloomops(body) else None
    left = result.get("envelope_seal") if isinstance(result, dict) else None
    return left if isinstance(left, str) else None


def _seal_gap(tenant: str | None, euid: str, env: Any,
              rows: list[dict[str, Any]]) -> Break | None:
    """What the envelope's seal says of a subject's records (oldest first): the record of
    the action that sealed it is among them and is the newest that sealed one, and the
    envelope is as sealed unless another writer's record came after. A subject no action of
    bloomops sealed (older records, another writer's work alone) is not read so."""
    sealing = [r for r in rows if _sealed_by(r["body"])]
    if not isinstance(env, dict) or not sealing:
        return None
    newest = sealing[-1]
    seal = env.get(ENVELOPE_SEAL)
    if not isinstance(seal, str):
        return Break(euid, newest["record_euid"], "sealed the subject's envelope, which now"
                     " carries no seal: the envelope was rewritten outside bloomops")
    if _sealed_by(newest["body"]) != seal:
        if any(_sealed_by(r["body"]) == seal for r in sealing):
            return Break(euid, newest["record_euid"], "is the newest record that sealed the"
                         " subject's envelope, but the envelope carries an earlier record's"
                         " seal: it was set back to an earlier state")
        return Break(euid, euid, "carries the seal of an action of bloomops whose record is"
                     " not among its records: that record was removed, or made to look like"
                     " another writer's", what="subject")
    if envelope_sealed(tenant, euid, env):
        return None
    after = rows[rows.index(newest) + 1:]
    if any(not written_by_bloomops(r["body"]) for r in after):
        return None  # another writer (Bloom) changed it since, with a record of its own
    return Break(euid, newest["record_euid"], "is the newest record that sealed the subject's"
                 " envelope, which has changed since with no record: changed outside"
                 " bloomops")


def revision_gaps(tenant: str | None, keys: list[str] | None) -> list[Break]:
    """The subjects (of ``keys``, else all) whose records' revisions or envelope's seal say
    one was removed or the subject changed without one."""
    only = "AND s.euid = ANY(%(keys)s)" if keys is not None else ""
    by_subject: dict[int, list[dict[str, Any]]] = {}
    for row in fetch_all(_ON_SUBJECTS.format(only=only), {"tenant": tenant, "keys": keys}):
        by_subject.setdefault(row["subject_uid"], []).append(row)
    return [b for rows in by_subject.values()
            if (b := _revision_gap(rows[0]["euid"], rows[0]["revision"], rows)
                or _seal_gap(tenant, rows[0]["euid"], rows[0]["env"], rows)) is not None]


# A claim and each renewal set a lease's heartbeat and expiry, and their records keep both
# (the instant they were written, the expiry in their result). A renewal changes nothing on
# the subject, so its removal leaves every revision whole: the lease, later than its newest
# record, says it. Bloom's records keep no expiry: once Bloom moved a lease, it is not read.
_LEASES = """SELECT l.uid, l.euid, s.euid AS subject_euid, l.json_addl->'properties' AS props,
        r.euid AS record_euid, r.json_addl AS body
    FROM generic_instance s
    JOIN generic_instance_lineage e ON e.parent_instance_uid = s.uid
     AND e.relationship_type = %(rel)s AND NOT e.is_deleted
    JOIN generic_instance l ON l.uid = e.child_instance_uid AND l.tenant_id = %(tenant)s
    LEFT JOIN LATERAL (
        SELECT a.uid, a.euid, a.json_addl FROM generic_instance a
        WHERE a.tenant_id = %(tenant)s AND a.type = 'execution_queue'
          AND (a.json_addl->'chain'->>'key' IN (l.euid, s.euid)
               OR (NOT a.json_addl ? 'chain' AND a.json_addl->>'target_euid' IN (l.euid, s.euid)))
          AND l.euid IN (a.json_addl->>'lease_lookup_euid', a.json_addl->>'target_euid')
    ) r ON true
    WHERE s.tenant_id = %(tenant)s {only}
    ORDER BY l.uid, r.uid"""


def _set_by(body: Any, lease: str) -> str | None:
    """The expiry bloomops' record of a claim or renewal gave ``lease``, else None."""
    result = body.get("result") if written_by_bloomops(body) else None
    if isinstance(result, dict) and result.get("lease_euid") == lease:
        expiry = result.get("expires_at")
        return expiry if isinstance(expiry, str) else None
    return None


def _lease_gap(rows: list[dict[str, Any]]) -> Break | None:
    lease, props = rows[0]["euid"], rows[0]["props"]
    if not isinstance(props, dict) or "bench_seq" in props:
        return None  # the benchmark's leases are filler, written without records
    named = [r for r in rows if r["record_euid"] is not None]
    if not named:
        return Break(lease, lease, "is named by no action record: the record of its claim"
                     " was removed, or the lease was made without one", what="lease")
    last = next((r for r in reversed(named) if not written_by_bloomops(r["body"])
                 or _set_by(r["body"], lease) is not None), None)
    if last is None:
        return Break(lease, named[0]["record_euid"], f"names lease {lease}, but no record"
                     " of its claim does: that record was removed")
    if not written_by_bloomops(last["body"]):
        return None
    worker = (last["body"].get("result") or {}).get("worker_euid")
    if isinstance(worker, str) and props.get("worker_lookup_euid") != worker:
        return Break(lease, last["record_euid"], f"gave lease {lease} to worker {worker}, but"
                     f" the lease names {props.get('worker_lookup_euid')}: changed outside"
                     " bloomops")
    said = (parse_ts_or_none(_set_by(last["body"], lease)),
            parse_ts_or_none(last["body"].get("executed_at")))
    now = (parse_ts_or_none(props.get("expires_at")), parse_ts_or_none(props.get("heartbeat_at")))
    if now == said or None in now or None in said:
        return None
    later = now[0] > said[0] or now[1] > said[1]  # type: ignore[operator]
    return Break(lease, last["record_euid"], f"is the newest record of a claim or renewal of"
                 f" lease {lease} and gave it until {_set_by(last['body'], lease)}, but the"
                 f" lease runs until {props.get('expires_at')} (heartbeat"
                 f" {props.get('heartbeat_at')}): " + (
                     "a newer renewal's record was removed, or the lease was extended"
                     " without one" if later else "the lease was set back without a record"))


def lease_gaps(tenant: str | None, keys: list[str] | None) -> list[Break]:
    """The leases (of the subjects among ``keys``, else all) their records do not account
    for."""
    only = "AND s.euid = ANY(%(keys)s)" if keys is not None else ""
    by_lease: dict[int, list[dict[str, Any]]] = {}
    for row in fetch_all(_LEASES.format(only=only), {
            "tenant": tenant, "keys": keys, "rel": REL["subject_lease"]}):
        by_lease.setdefault(row["uid"], []).append(row)
    return [b for rows in by_lease.values() if (b := _lease_gap(rows)) is not None]


def ended_unrecorded(hold: str, subject_uid: str) -> str:
    """SQL: hold ``hold`` (an alias) of the subject whose uid is ``subject_uid`` reads ended,
    and no action record on the subject ended it: bloomops' release (``hold_euids``) or
    cancel (``holds_ended``), or another writer's release naming it. Its status was changed
    outside any writer's actions: the approval gate holds it as active, the verification
    names it."""
    return f"""(({hold}.json_addl->'properties'->>'status') IS DISTINCT FROM 'ACTIVE'
        AND NOT EXISTS (SELECT 1 FROM generic_instance_lineage he
          JOIN generic_instance hr ON hr.uid = he.parent_instance_uid
           AND hr.tenant_id = %(tenant)s AND hr.type = 'execution_queue'
          WHERE he.child_instance_uid = {subject_uid} AND NOT he.is_deleted
            AND he.relationship_type = '{REL["executed_on"]}'
            AND (hr.json_addl->'result'->'hold_euids' ? {hold}.euid
                 OR hr.json_addl->'result'->'holds_ended' ? {hold}.euid
                 OR (hr.json_addl->>'action_key' = 'release_execution_hold'
                     AND hr.json_addl->'result'->>'hold_euid' = {hold}.euid))))"""


def hold_gaps(tenant: str | None, keys: list[str] | None) -> list[Break]:
    """The holds (of the subjects among ``keys``, else all) read as ended that no record
    ended."""
    only = "AND s.euid = ANY(%(keys)s)" if keys is not None else ""
    rows = fetch_all(f"""SELECT s.euid AS subject_euid, x.euid,
            x.json_addl->'properties'->>'status' AS status
        FROM generic_instance s
        JOIN generic_instance_lineage l ON l.parent_instance_uid = s.uid
         AND l.relationship_type = %(rel)s AND NOT l.is_deleted
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND x.tenant_id = %(tenant)s
        WHERE s.tenant_id = %(tenant)s {only} AND {ended_unrecorded("x", "s.uid")}
        ORDER BY x.uid""", {"tenant": tenant, "keys": keys, "rel": REL["subject_hold"]})
    return [Break(r["subject_euid"], r["euid"], f"reads {r['status'] or 'ended'}, but no"
                  " action record ended it: changed outside bloomops", what="hold")
            for r in rows]


def subject_chain_breaks(tenant: str | None, euid: str, uid: int) -> list[Break]:
    """What the inspector and a bundle's verdict say of a subject's records: every chain a
    record of its history is on, walked (an approval's, a lease's, not only the subject's),
    and every record on the subject's or its approvals' chains that its history lacks (an
    executed_on edge removed hides the newest record, which no next link names)."""
    linked = fetch_all(
        f"""SELECT a.euid, a.json_addl->'{CHAIN}'->>'key' AS chain_key
        FROM generic_instance_lineage l JOIN generic_instance a ON a.uid = l.parent_instance_uid
        WHERE l.child_instance_uid = %(uid)s AND l.relationship_type = 'executed_on'
          AND NOT l.is_deleted AND a.tenant_id = %(tenant)s""",
        {"uid": uid, "tenant": tenant})
    approvals = fetch_all(
        """SELECT x.euid FROM generic_instance_lineage l
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND x.tenant_id = %(tenant)s
        WHERE l.parent_instance_uid = %(uid)s AND NOT l.is_deleted
          AND l.relationship_type = 'execution_subject_approval'""",
        {"uid": uid, "tenant": tenant})
    own = [euid, *(a["euid"] for a in approvals)]
    keys = sorted({r["chain_key"] for r in linked if r["chain_key"]} | set(own))
    breaks = verify_chains(tenant, keys).breaks
    have = {r["euid"] for r in linked}
    hidden = fetch_all(
        f"""SELECT euid, json_addl->'{CHAIN}'->>'key' AS chain_key FROM generic_instance
        WHERE {RECORDS} AND NOT is_deleted AND json_addl->'{CHAIN}'->>'key' = ANY(%(keys)s)
          AND subtype <> %(evidence)s ORDER BY uid""",
        {"tenant": tenant, "keys": own, "evidence": EVIDENCE_ACTION})
    return breaks + [Break(r["chain_key"], r["euid"], "is on this chain but not in the"
                           " subject's history (its executed_on edge was removed)")
                     for r in hidden if r["euid"] not in have]


