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
    another_writers,
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
            if another_writers(row["body"]):
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


def _sealed_by(body: Any, euid: str) -> str | None:
    """The envelope seal bloomops' record of an action that changed subject ``euid`` left:
    its own, or one it made as an output (``output_seals``)."""
    result = body.get("result") if written_by_bloomops(body) else None
    if not isinstance(result, dict):
        return None
    outputs = result.get("output_seals")
    left = (result.get("envelope_seal") if body.get("subject_lookup_euid") == euid
            else outputs.get(euid) if isinstance(outputs, dict) else None)
    return left if isinstance(left, str) else None


def _seal_gap(tenant: str | None, euid: str, env: Any,
              rows: list[dict[str, Any]]) -> Break | None:
    """What the envelope's seal says of a subject's records (oldest first): the record of
    the action that sealed it is among them and is the newest that sealed one, and the
    envelope is as sealed unless another writer's record came after. A subject no action of
    bloomops sealed (older records, another writer's work alone) is not read so."""
    sealing = [r for r in rows if _sealed_by(r["body"], euid)]
    if not isinstance(env, dict) or not sealing:
        return None
    newest = sealing[-1]
    seal = env.get(ENVELOPE_SEAL)
    if not isinstance(seal, str):
        return Break(euid, newest["record_euid"], "sealed the subject's envelope, which now"
                     " carries no seal: the envelope was rewritten outside bloomops")
    if _sealed_by(newest["body"], euid) != seal:
        if any(_sealed_by(r["body"], euid) == seal for r in sealing):
            return Break(euid, newest["record_euid"], "is the newest record that sealed the"
                         " subject's envelope, but the envelope carries an earlier record's"
                         " seal: it was set back to an earlier state")
        return Break(euid, euid, "carries the seal of an action of bloomops whose record is"
                     " not among its records: that record was removed, or made to look like"
                     " another writer's", what="subject")
    if envelope_sealed(tenant, euid, env):
        return None
    after = rows[rows.index(newest) + 1:]
    if any(another_writers(r["body"]) for r in after):
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
        r.euid AS record_euid, r.json_addl AS body, we.worker_edge
    FROM generic_instance s
    JOIN generic_instance_lineage e ON e.parent_instance_uid = s.uid
     AND e.relationship_type = %(rel)s AND NOT e.is_deleted
    JOIN generic_instance l ON l.uid = e.child_instance_uid AND l.tenant_id = %(tenant)s
    -- the worker the lease's edge names, once per lease (not once per record of it)
    LEFT JOIN LATERAL (
        SELECT w.euid AS worker_edge FROM generic_instance_lineage le
        JOIN generic_instance w ON w.uid = le.parent_instance_uid AND w.tenant_id = %(tenant)s
        WHERE le.child_instance_uid = l.uid AND NOT le.is_deleted
          AND le.relationship_type = %(worker_rel)s
        ORDER BY le.uid DESC LIMIT 1) we ON true
    LEFT JOIN LATERAL (
        -- sealed records by chain key and another writer's by target, each through its own
        -- index (an OR of the two read every record of the tenant for each lease)
        SELECT a.uid, a.euid, a.json_addl FROM generic_instance a
        WHERE a.tenant_id = %(tenant)s AND a.type = 'execution_queue'
          AND a.json_addl->'chain'->>'key' = ANY(ARRAY[l.euid, s.euid])
          AND l.euid IN (a.json_addl->>'lease_lookup_euid', a.json_addl->>'target_euid')
        UNION ALL
        SELECT a.uid, a.euid, a.json_addl FROM generic_instance a
        WHERE a.tenant_id = %(tenant)s AND a.type = 'execution_queue'
          AND NOT a.json_addl ? 'chain'
          AND a.json_addl->>'target_euid' = ANY(ARRAY[l.euid, s.euid])
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
    last = next((r for r in reversed(named) if another_writers(r["body"])
                 or _set_by(r["body"], lease) is not None), None)
    if last is None:
        return Break(lease, named[0]["record_euid"], f"names lease {lease}, but no record"
                     " of its claim does: that record was removed")
    if another_writers(last["body"]):
        return None
    worker = (last["body"].get("result") or {}).get("worker_euid")
    # the copy a page shows, and the edge the engine decides by (guards.guard_lease)
    for named in (props.get("worker_lookup_euid"), rows[0]["worker_edge"]):
        if isinstance(worker, str) and named != worker:
            return Break(lease, last["record_euid"], f"gave lease {lease} to worker {worker},"
                         f" but the lease names {named}: changed outside bloomops")
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
            "tenant": tenant, "keys": keys, "rel": REL["subject_lease"],
            "worker_rel": REL["worker_lease"]}):
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
            AND ((hr.json_addl ? 'chain'
                  AND (hr.json_addl->'result'->'hold_euids' ? {hold}.euid
                       OR hr.json_addl->'result'->'holds_ended' ? {hold}.euid))
                 OR (hr.json_addl->>'action_key' = 'release_execution_hold'
                     AND hr.json_addl->'result'->>'hold_euid' = {hold}.euid))))"""


def requeued_unrecorded(dead_letter: str, subject_uid: str) -> str:
    """SQL: dead letter ``dead_letter`` (an alias), which a record of bloomops made, reads
    requeued, and no record on the subject requeued it (``dead_letters_resolved``): marked
    so outside any action, which the requeue's two-person rule must not take for done.
    Another writer's dead letter has only its snapshot."""
    def on_subject(test: str) -> str:
        return f"""EXISTS (SELECT 1 FROM generic_instance_lineage de
          JOIN generic_instance dr ON dr.uid = de.parent_instance_uid
           AND dr.tenant_id = %(tenant)s AND dr.type = 'execution_queue'
          WHERE de.child_instance_uid = {subject_uid} AND NOT de.is_deleted
            AND de.relationship_type = '{REL["executed_on"]}' AND {test})"""
    return (f"""(({dead_letter}.json_addl->'properties'->>'resolution_state') = 'REQUEUED'
        AND {on_subject(f"dr.json_addl ? 'chain' AND dr.json_addl->'result'->>"
                        f"'dead_letter_euid' = {dead_letter}.euid")}
        AND NOT {on_subject(f"dr.json_addl->'result'->'dead_letters_resolved' ?"
                            f" {dead_letter}.euid")})""")


def hold_gaps(tenant: str | None, keys: list[str] | None) -> list[Break]:
    """The holds (of the subjects among ``keys``, else all) read as ended that no record
    ended, or active but no longer the subject's."""
    only = "AND s.euid = ANY(%(keys)s)" if keys is not None else ""
    rows = fetch_all(f"""SELECT s.euid AS subject_euid, x.euid,
            x.json_addl->'properties'->>'status' AS status
        FROM generic_instance s
        JOIN generic_instance_lineage l ON l.parent_instance_uid = s.uid
         AND l.relationship_type = %(rel)s AND NOT l.is_deleted
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND x.tenant_id = %(tenant)s
        WHERE s.tenant_id = %(tenant)s {only} AND {ended_unrecorded("x", "s.uid")}
        ORDER BY x.uid""", {"tenant": tenant, "keys": keys, "rel": REL["subject_hold"]})
    ended = [Break(r["subject_euid"], r["euid"], f"reads {r['status'] or 'ended'}, but no"
                   " action record ended it: changed outside bloomops", what="hold")
             for r in rows]
    # an active hold bloomops placed, its edge to the subject gone (deleted, or moved to
    # another): the subject reads unheld, as lineage alone decides (RULES.md#objects)
    unlinked = fetch_all(f"""SELECT s.euid AS subject_euid, h.euid, h.is_deleted
        FROM generic_instance s
        JOIN generic_instance_lineage e ON e.child_instance_uid = s.uid AND NOT e.is_deleted
         AND e.relationship_type = '{REL["executed_on"]}'
        JOIN generic_instance r ON r.uid = e.parent_instance_uid AND r.tenant_id = %(tenant)s
         AND r.type = 'execution_queue' AND r.json_addl ? '{CHAIN}'
        JOIN generic_instance h ON h.euid = r.json_addl->'result'->>'hold_euid'
         AND h.tenant_id = %(tenant)s
        WHERE s.tenant_id = %(tenant)s {only}
          AND h.json_addl->'properties'->>'status' = 'ACTIVE'
          AND (h.is_deleted OR NOT EXISTS (SELECT 1 FROM generic_instance_lineage he
               WHERE he.parent_instance_uid = s.uid AND he.child_instance_uid = h.uid
                 AND he.relationship_type = %(rel)s AND NOT he.is_deleted))
        ORDER BY h.uid""", {"tenant": tenant, "keys": keys, "rel": REL["subject_hold"]})
    return ended + [Break(r["subject_euid"], r["euid"], "is active, but " + (
        "marked deleted" if r["is_deleted"] else "no longer linked to the subject")
        + ": the subject reads unheld, changed outside bloomops", what="hold")
        for r in unlinked]


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


