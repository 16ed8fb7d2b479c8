"""One subject: every "why not in the queue" reason, its history through lineage, its
action records and TapDB's audit rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bloomops.execution import clock
from bloomops.execution.envelope import (
    envelope_problems,
    properties_of,
    ts,
)
from bloomops.execution.errors import PLAIN
from bloomops.execution.objects import SUBJECT_SQL
from bloomops.execution.selectors.base import (
    ACTION_WHY,
    ACTION_WORKER,
    EnvelopeView,
    read_params,
)
from bloomops.execution.sql import (
    ENV,
    ENVELOPE_VALID,
    QP,
    QUEUES,
    READY_TS,
    SCOPE_MATCH,
    TEMPLATE_CODE,
    TEMPLATES,
    TERMINAL,
    VISIBLE,
    hold_active,
)
from bloomops.tapdb.db import fetch_all, fetch_one


@dataclass
class Reason:
    code: str
    message: str
    # For a screen: the message up to its instant, and the instant (stored UTC text), so the
    # instant can be shown humanely; the message says both for the API.
    lead: str = ""
    when: str | None = None


# The "why not in queue" reasons (RULES.md#visibility), in plain words. subject_diagnostics adds the
# particulars (which hold, until when); list views show these.
REASON_TEXT: dict[str, str] = {
    "TERMINAL_STATE": "Terminal state.",
    "CANCEL_REQUESTED": "Cancellation was requested.",
    "ACTIVE_HOLD": "An active hold.",
    "ACTIVE_LEASE": "Leased by a worker.",
    "RETRY_WINDOW_NOT_REACHED": "Retry window not reached.",
    "NOT_READY_YET": "Not ready yet.",
    "NEXT_QUEUE_KEY_MISSING": "Not routed to any queue.",
    "QUEUE_NOT_FOUND": "Routed to a queue that does not exist.",
    "STATE_NOT_ELIGIBLE": "State not eligible in this queue.",
    "TEMPLATE_NOT_ACCEPTED": "The queue does not take this kind of subject.",
    "SCOPE_MISMATCH": "Site/platform/assay outside the queue's scope.",
    # Reasons that are also refusal codes read the same in both places.
    **{code: PLAIN[code] for code in ("QUEUE_DISABLED", "WORKER_UNAVAILABLE",
                                      "WORKER_NOT_ELIGIBLE", "INVALID_ENVELOPE")},
}


@dataclass
class Diagnostics(EnvelopeView):
    uid: int
    euid: str
    name: str
    template_code: str
    execution: dict[str, Any]
    props: dict[str, Any]
    created_dt: datetime
    queue_key: str | None
    queue: dict[str, Any] | None
    visible: bool
    derived_state: str | None
    reasons: list[Reason]
    active_lease: dict[str, Any] | None
    active_holds: list[dict[str, Any]]
    worker: dict[str, Any] | None = None

    @property
    def reason_codes(self) -> list[str]:
        return [r.code for r in self.reasons]


DIAG_SQL = f"""
    SELECT s.uid, s.euid, s.name, s.created_dt, s.json_addl->'properties' AS props,
           {TEMPLATE_CODE} AS template_code, {ENV} AS execution, {READY_TS} AS ready_ts,
           q.euid AS queue_euid, {QP} AS queue,
           (q.uid IS NOT NULL AND {VISIBLE} AND {ENVELOPE_VALID}) AS visible,
           (q.uid IS NULL OR q.template_codes ? {TEMPLATE_CODE}) AS template_ok,
           (q.uid IS NULL OR ({SCOPE_MATCH})) AS scope_ok,
           (SELECT jsonb_build_object('euid', x.euid, 'props', x.json_addl->'properties',
                                      'worker_name', (
                       SELECT coalesce(w.json_addl->'properties'->>'display_name',
                                       w.json_addl->'properties'->>'worker_key')
                         FROM generic_instance w
                        WHERE w.euid = x.json_addl->'properties'->>'worker_lookup_euid'
                          AND w.tenant_id = %(tenant)s))
              FROM generic_instance_lineage l
              JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
                   AND x.tenant_id = %(tenant)s
             WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
               AND l.relationship_type = 'execution_subject_lease'
               AND x.json_addl->'properties'->>'status' = 'ACTIVE'
             ORDER BY x.uid DESC LIMIT 1) AS active_lease,
           (SELECT coalesce(jsonb_agg(jsonb_build_object('euid', x.euid,
                                                         'props', x.json_addl->'properties')
                                      ORDER BY x.uid), '[]'::jsonb)
              FROM generic_instance_lineage l
              JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
                   AND x.tenant_id = %(tenant)s
             WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
               AND l.relationship_type = 'execution_subject_hold'
               AND {hold_active("x")}) AS active_holds,
           (SELECT jsonb_build_object('euid', w.euid, 'props', w.json_addl->'properties')
              FROM generic_instance w
             WHERE w.euid = %(worker_euid)s AND w.tenant_id = %(tenant)s
               AND w.type = 'system' AND w.subtype = 'worker') AS worker
    FROM generic_instance s
    JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
    LEFT JOIN ({QUEUES}) q ON {QP}->>'queue_key' = {ENV}->>'next_queue_key'
    WHERE s.euid = %(euid)s AND s.tenant_id = %(tenant)s AND NOT s.is_deleted
      AND {SUBJECT_SQL}
"""


def subject_diagnostics(
    euid: str,
    *,
    now: datetime | None = None,
    tenant: str | None = None,
    worker_euid: str | None = None,
) -> Diagnostics | None:
    """Envelope, derived visibility and every "why not in queue" reason (for a given
    worker too, when worker_euid is passed). One query."""
    from bloomops.execution.envelope import read_envelope
    from bloomops.execution.policy import (
        eligibility_problems,
        is_held,
        is_terminal,
        lease_is_active,
        offered_states,
        readable_worker,
        retry_waiting,
        worker_status_problem,
    )

    moment = now or clock.now()
    row = fetch_one(DIAG_SQL, read_params(moment, tenant, euid=euid, worker_euid=worker_euid))
    if row is None:
        return None
    env = read_envelope({"properties": {"execution": row["execution"] or {}}})
    now_ts = ts(moment)
    queue = row["queue"]
    reasons: list[Reason] = [
        Reason("INVALID_ENVELOPE", f"The execution envelope cannot be used: {problem}.")
        for _, problem in (envelope_problems(row["execution"])
                           if row["execution"] is not None else [])
    ]
    lease = row["active_lease"]
    holds = row["active_holds"] or []
    state = env["state"]
    if is_terminal(env):
        reasons.append(Reason("TERMINAL_STATE", f"The subject is in terminal state {state}."))
    if env.get("cancel_requested"):
        reasons.append(Reason("CANCEL_REQUESTED", "Cancellation was requested."))
    if is_held(env, holds):
        why = "; ".join(h["props"].get("reason") or "" for h in holds) or env.get("hold_reason")
        reasons.append(Reason("ACTIVE_HOLD", f"An active hold: {why}."))
    derived = None
    if lease:
        if lease_is_active(lease["props"], now_ts):
            derived = "LEASED"
            who = lease["props"].get("worker_lookup_euid")
            reasons.append(Reason(
                "ACTIVE_LEASE", f"Leased by worker {who} until {lease['props'].get('expires_at')}.",
                f"{lease.get('worker_name') or who} has it; the claim ends",
                lease["props"].get("expires_at")))
        else:
            # Stored ACTIVE but past expiry: inactive for every read (RULES.md#leases).
            derived = "LEASE_EXPIRED"
            lease = None
    if not env.get("next_queue_key"):
        reasons.append(Reason("NEXT_QUEUE_KEY_MISSING", "The subject is not routed to a queue."))
    elif queue is None:
        reasons.append(Reason("QUEUE_NOT_FOUND", f"No queue {env['next_queue_key']!r} exists."))
    else:
        if state not in offered_states(queue):
            eligible = ", ".join(offered_states(queue))
            reasons.append(Reason("STATE_NOT_ELIGIBLE", f"State {state} is not eligible in"
                                  f" {queue['queue_key']} ({eligible})."))
        if retry_waiting(env, now_ts):
            reasons.append(Reason("RETRY_WINDOW_NOT_REACHED",
                                  f"Retry is not due until {env['retry_at']}.",
                                  "The retry is due", env["retry_at"]))
        elif row["ready_ts"] > now_ts:
            reasons.append(Reason("NOT_READY_YET", f"Not ready until {row['ready_ts']}.",
                                  "It becomes ready", row["ready_ts"]))
        if not row["template_ok"]:
            reasons.append(Reason("TEMPLATE_NOT_ACCEPTED", f"{queue['queue_key']} does not take"
                                  f" {row['template_code']} subjects."))
        if not row["scope_ok"]:
            reasons.append(Reason("SCOPE_MISMATCH", "The subject's site/platform/assay is"
                                  " outside the queue's scope."))
        if not queue.get("enabled", True):
            why = queue.get("disabled_reason")  # the inspector says why, as the queue does
            reasons.append(Reason("QUEUE_DISABLED", f"Queue {queue['queue_key']} is disabled"
                                  + (f": {str(why).rstrip('.')}." if why else ".")))
    worker = row["worker"]
    if worker:
        worker = {**worker, "props": readable_worker(worker.get("props"))}
    if worker and queue is not None:
        problem = worker_status_problem(worker["props"])
        if problem:
            reasons.append(Reason("WORKER_UNAVAILABLE", problem))
        for code, message in eligibility_problems(worker["props"], queue):
            if code == "QUEUE_DISABLED":
                continue
            reasons.append(Reason("WORKER_NOT_ELIGIBLE", message))
    visible = bool(row["visible"])
    if visible:
        derived = "VISIBLE_IN_QUEUE"
    return Diagnostics(
        uid=row["uid"], euid=row["euid"], name=row["name"], template_code=row["template_code"],
        execution=env, props=properties_of({"properties": row["props"]}),
        created_dt=row["created_dt"],
        queue_key=env.get("next_queue_key"), queue=queue, visible=visible,
        derived_state=derived, reasons=reasons,
        active_lease=lease, active_holds=holds, worker=worker,
    )


def subject_history(subject_uid: int) -> dict[str, list[dict[str, Any]]]:
    """Leases, execution records, holds, dead letters and outputs of a subject, found through
    lineage only (RULES.md#objects), of the deployment's tenant. One query."""
    rows = fetch_all(
        """
        SELECT l.relationship_type AS rel, x.uid, x.euid, x.name, x.created_dt,
               x.json_addl->'properties' AS props
        FROM generic_instance_lineage l
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
             AND x.tenant_id = %(tenant)s
        WHERE l.parent_instance_uid = %(uid)s AND NOT l.is_deleted
          AND l.relationship_type IN ('execution_subject_lease', 'execution_subject_record',
                'execution_subject_hold', 'execution_subject_dead_letter',
                'execution_subject_output')
        ORDER BY x.uid
        """,
        read_params(None, None, uid=subject_uid),
    )
    out: dict[str, list[dict[str, Any]]] = {
        "leases": [], "records": [], "holds": [], "dead_letters": [], "outputs": []
    }
    key = {
        "execution_subject_lease": "leases",
        "execution_subject_record": "records",
        "execution_subject_hold": "holds",
        "execution_subject_dead_letter": "dead_letters",
        "execution_subject_output": "outputs",
    }
    for row in rows:
        out[key[row["rel"]]].append(row)
    return out


def lineage_of(instance_uid: int) -> list[dict[str, Any]]:
    """Every live lineage edge touching an instance, both directions, to objects of the
    deployment's tenant. One query."""
    return fetch_all(
        """
        SELECT 'child' AS direction, l.relationship_type, x.euid, x.name, x.type, x.subtype,
               l.created_dt
        FROM generic_instance_lineage l JOIN generic_instance x ON x.uid = l.child_instance_uid
             AND x.tenant_id = %(tenant)s
        WHERE l.parent_instance_uid = %(uid)s AND NOT l.is_deleted
        UNION ALL
        SELECT 'parent', l.relationship_type, x.euid, x.name, x.type, x.subtype, l.created_dt
        FROM generic_instance_lineage l JOIN generic_instance x ON x.uid = l.parent_instance_uid
             AND x.tenant_id = %(tenant)s
        WHERE l.child_instance_uid = %(uid)s AND NOT l.is_deleted
        ORDER BY 7, 1
        """,
        read_params(None, None, uid=instance_uid),
    )


def action_history(instance_uid: int) -> list[dict[str, Any]]:
    """Action records executed on an instance: who (and their name as it read then, in
    records written since it was kept), when, what, why. One query."""
    return fetch_all(
        f"""
        SELECT a.euid, a.subtype AS action_key, a.json_addl->>'executed_by' AS executed_by,
               a.json_addl->>'executed_by_name' AS executed_by_name,
               a.json_addl->>'executed_at' AS executed_at, {ACTION_WHY} AS reason,
               a.json_addl->'result' AS result, a.json_addl->'captured_data' AS payload,
               {ACTION_WORKER}
        FROM generic_instance_lineage l
        JOIN generic_instance a ON a.uid = l.parent_instance_uid AND NOT a.is_deleted
             AND a.tenant_id = %(tenant)s
        WHERE l.child_instance_uid = %(uid)s AND l.relationship_type = 'executed_on'
          AND NOT l.is_deleted
        ORDER BY a.uid
        """,
        read_params(None, None, uid=instance_uid),
    )


def last_action(euid: str, *, tenant: str | None = None) -> dict[str, Any] | None:
    """The newest action record executed on an instance, by its EUID (who, when, what,
    why), or None. One query."""
    return fetch_one(
        f"""
        SELECT a.subtype AS action_key, a.json_addl->>'executed_by' AS executed_by,
               a.json_addl->>'executed_at' AS executed_at, {ACTION_WHY} AS reason
        FROM generic_instance x
        JOIN generic_instance_lineage l ON l.child_instance_uid = x.uid
             AND l.relationship_type = 'executed_on' AND NOT l.is_deleted
        JOIN generic_instance a ON a.uid = l.parent_instance_uid AND NOT a.is_deleted
             AND a.tenant_id = %(tenant)s
        WHERE x.euid = %(euid)s AND x.tenant_id = %(tenant)s AND NOT x.is_deleted
        ORDER BY a.uid DESC LIMIT 1
        """,
        read_params(None, tenant, euid=euid),
    )


def template_code(template_uid: int | None) -> str | None:
    """A template uid's semantic code as the visibility rule reads it (``sql.TEMPLATES``,
    live: not the per-process template cache, which misses templates another writer adds);
    None when no template row has that uid. One query."""
    row = fetch_one(f"SELECT t.code FROM ({TEMPLATES}) t WHERE t.uid = %(uid)s",
                    {"uid": template_uid})
    return row["code"] if row else None


def subjects_named(names: list[str], *, tenant: str | None = None) -> dict[str, list[str]]:
    """Work-bearing objects whose name is one of ``names`` in any case, by the name as
    asked (stripped), oldest first (an intake preview warns of a name already registered).
    Both sides are lowercased by PostgreSQL: Python lowers some letters otherwise ("ΟΔΌΣ",
    "İ"). One query, on the names asked about (bloomops_subject_name)."""
    asked = sorted({n.strip() for n in names if n.strip()})
    if not asked:
        return {}
    rows = fetch_all(
        f"""SELECT a.asked, s.euid
            FROM unnest(%(names)s::text[]) AS a(asked)
            JOIN generic_instance s ON lower(s.name) = lower(a.asked)
            WHERE s.tenant_id = %(tenant)s AND NOT s.is_deleted AND {SUBJECT_SQL}
            ORDER BY s.uid""",
        read_params(None, tenant, names=asked))
    found: dict[str, list[str]] = {}
    for row in rows:
        found.setdefault(row["asked"], []).append(row["euid"])
    return found


def subjects_labelled(label: str, *, tenant: str | None = None) -> list[dict[str, Any]]:
    """The subjects a scanned or typed label means, oldest first, each with what tells them
    apart (euid, name, state, queue_key, site, created_dt) and whether its work is over
    (``terminal``): the one whose EUID it is and every one the lab named so (any case). More
    than one: the label is ambiguous, even when one of them has it as its EUID (another
    system's tubes carry EUIDs of the same form as their names), unless only one of them is
    not finished (``open_one``). One query (the EUID and name indexes)."""
    label = label.strip()
    if not label or not label.isprintable():
        return []
    return fetch_all(
        f"""SELECT s.euid, s.name, s.created_dt, {ENV}->>'state' AS state,
                   coalesce({TERMINAL}, false) AS terminal,
                   {ENV}->>'next_queue_key' AS queue_key,
                   s.json_addl->'properties'->>'site' AS site
            FROM generic_instance s
            WHERE s.tenant_id = %(tenant)s AND NOT s.is_deleted AND {SUBJECT_SQL}
              AND (s.euid = upper(%(label)s) OR lower(s.name) = lower(%(label)s))
            ORDER BY s.uid""",
        read_params(None, tenant, label=label))


def open_one(meant: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of the subjects a label means (``subjects_labelled``), the one whose work is not over
    when it is the only one: a lab that reuses its labels year after year names last year's
    finished tubes so too, and a scan means the tube in hand."""
    open_ = [m for m in meant if not m["terminal"]]
    return open_ if len(meant) > 1 and len(open_) == 1 else meant


def subject_names(euids: list[str], *, tenant: str | None = None) -> dict[str, str]:
    """Subjects' names as people know them, by EUID (those without one left out). One
    query, however many (what a step made, named in one banner)."""
    rows = fetch_all("SELECT s.euid, s.name FROM generic_instance s"
                     " WHERE s.euid = ANY(%(euids)s) AND s.tenant_id = %(tenant)s"
                     " AND NOT s.is_deleted", read_params(None, tenant, euids=list(euids)))
    return {r["euid"]: r["name"] for r in rows if r["name"]}


def subject_name(euid: str, *, tenant: str | None = None) -> str | None:
    """A subject's name, as people know it, or None. One query."""
    return subject_names([euid], tenant=tenant).get(euid)
