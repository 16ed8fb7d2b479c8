"""Pure policy: worker eligibility (RULES.md#claims), retry classification and backoff
(RULES.md#retries)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

from bloomops.execution.envelope import parse_ts_or_none, ts
from bloomops.execution.sql import SCOPE_FIELDS
from bloomops.execution.states import (
    DEFAULT_HEARTBEAT_TTL_SECONDS,
    ELIGIBLE_STATES,
    STOPPED_WORKER_STATUSES,
    TERMINAL_STATES,
    TRANSIENT_CLASSES,
    RetryClass,
    WorkerStatus,
    WorkerType,
)

# The worker fields the engine reads, by the type it reads them as. Another writer (Bloom,
# on the same database) may store anything there: a field of another type is read as
# absent, so a bad worker row falls back to its own defaults and no reader of all workers
# (the dashboard, /metrics, the recorder) fails on it.
_WORKER_TEXTS = ("worker_key", "worker_type", "status", "display_name", "host",
                 "build_version", "process_identity", "heartbeat_at", "last_error_class",
                 "last_error_at")
_WORKER_COUNTS = ("max_concurrent_leases", "heartbeat_ttl_seconds")
_WORKER_LISTS = ("capabilities", "site_scope", "platform_scope", "assay_scope")


def readable_worker(props: Any) -> dict[str, Any]:
    """A worker's stored properties with every field the engine reads of its type."""
    if not isinstance(props, dict):
        return {}
    out = dict(props)
    for name in _WORKER_TEXTS:
        if name in out and not isinstance(out[name], str):
            del out[name]
    for name in _WORKER_COUNTS:
        value = out.get(name)
        if name in out and (isinstance(value, bool) or not isinstance(value, int)
                            or value < 1):
            del out[name]
    for name in _WORKER_LISTS:
        if name in out:
            out[name] = _worker_list(out[name], scope=name != "capabilities")
    if not isinstance(out.get("drain_requested", False), bool):
        del out["drain_requested"]
    return out


# A worker scope another writer stored as no list of texts: it admits no subject (a scope
# fails closed, as a queue's does), and the workers page shows it as this.
UNREADABLE_SCOPE = "(unreadable)"


def _worker_list(value: Any, *, scope: bool) -> list[str]:
    """A stored worker list as the engine reads it: its texts. A scope stored as one text is
    that value (as a queue's is, scope_values); one stored as anything else, or as a list
    with no text in it, admits nothing rather than anything."""
    if scope and isinstance(value, str):
        return [value]
    texts = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    unreadable = value not in (None, []) and not texts
    return [UNREADABLE_SCOPE] if scope and unreadable else texts


def property_text(value: Any) -> str:
    """A subject's property as the SQL reads it (``->>``): a text as itself, absent or null
    as '', anything else as its JSON (true, 1, ["sfo"]). One reading for every scope test."""
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def _overlaps(worker_scope: list[str] | None, queue_scope: list[str] | None) -> bool:
    """An empty scope on either side means "any"."""
    if not worker_scope or not queue_scope:
        return True
    return bool(set(worker_scope) & set(queue_scope))


def lease_is_active(props: dict[str, Any], now_ts: str) -> bool:
    """RULES.md#leases 5.1 (the SQL twin is sql.lease_active): ACTIVE and unexpired."""
    expires = ts(parse_ts_or_none(props.get("expires_at")))
    return props.get("status") == "ACTIVE" and expires is not None and expires > now_ts


def lease_effective_status(props: dict[str, Any], now_ts: str) -> str | None:
    """The status every read reports (sql.lease_effective_status): an ACTIVE lease past its
    expiry is EXPIRED whether or not the sweeper has marked it."""
    status = props.get("status")
    if status == "ACTIVE" and not lease_is_active(props, now_ts):
        return "EXPIRED"
    return status


def is_terminal(env: dict[str, Any]) -> bool:
    """RULES.md#envelope (the SQL twin is sql.TERMINAL): by its flag or by its state."""
    return env.get("terminal") is True or env.get("state") in TERMINAL_STATES


def is_held(env: dict[str, Any], active_holds: list[Any]) -> bool:
    """RULES.md#holds (the SQL twin is sql.held): by the envelope's hold_state or by an
    ACTIVE hold in lineage, ``active_holds`` as a read found them."""
    return bool(active_holds) or env.get("hold_state") == "ACTIVE"


def retry_waiting(env: dict[str, Any], now_ts: str) -> bool:
    """RULES.md#retries (the SQL twin is sql.retry_waiting): its retry window not reached."""
    retry = ts(parse_ts_or_none(env.get("retry_at")))
    return retry is not None and retry > now_ts


def eligibility_problems(worker: dict[str, Any], queue: dict[str, Any]) -> list[tuple[str, str]]:
    """Why this worker may not claim from this queue, as (code, plain message) pairs; empty
    when it may. Lease-count and drain checks live with the worker status checks."""
    problems: list[tuple[str, str]] = []
    if not queue.get("enabled", True):
        reason = queue.get("disabled_reason")
        problems.append(("QUEUE_DISABLED", "The queue is disabled" + (f": {reason}" if reason
                                                                      else ".")))
    wtype = worker.get("worker_type")
    if queue.get("manual_only") and wtype != WorkerType.HUMAN_SESSION:
        problems.append(("WORKER_NOT_ELIGIBLE", "The queue is manual-only (human workers)."))
    missing = sorted(set(queue.get("required_worker_capabilities") or [])
                     - set(worker.get("capabilities") or []))
    if missing:
        problems.append(("WORKER_NOT_ELIGIBLE",
                         "Missing capabilities: " + ", ".join(missing) + "."))
    for scope in SCOPE_FIELDS:
        if not _overlaps(worker.get(f"{scope}_scope"), queue.get(f"{scope}_scope")):
            problems.append(("WORKER_NOT_ELIGIBLE", f"The worker's {scope} scope does not"
                             f" overlap the queue's ({', '.join(queue.get(f'{scope}_scope'))})."))
    return problems


def open_to_every_worker(queue: dict[str, Any]) -> bool:
    """A queue that asks no capability and is not manual-only: eligibility_problems finds
    none for any worker of its scopes, robots included (a new queue starts so)."""
    return not queue.get("manual_only") and not queue.get("required_worker_capabilities")


def worker_scopes(worker: dict[str, Any]) -> dict[str, list[str] | None]:
    """A worker's site/platform/assay scopes as the values it works, per field; None where
    it works any (an empty or absent scope)."""
    out: dict[str, list[str] | None] = {}
    for f in SCOPE_FIELDS:
        values = _worker_list(worker.get(f"{f}_scope"), scope=True)
        # unreadable: an empty list, which no value is in (in SQL, = ANY('{}') is false)
        out[f] = None if not values else [] if values == [UNREADABLE_SCOPE] else values
    return out


def worker_scope_problem(worker: dict[str, Any], props: dict[str, Any]
                         ) -> tuple[str, str, list[str]] | None:
    """Why this worker may not take this subject by its own scopes (RULES.md#claims), as
    (field, the subject's value, the worker's values), or None: a scope it has holds the
    subject's property, whatever the queue's scope admits. The SQL twin is
    statements.IN_WORKER_SCOPE."""
    for field, values in worker_scopes(worker).items():
        text = property_text(props.get(field))
        if values is not None and text not in values:
            return field, text, values
    return None


def liveness(props: dict[str, Any], now: datetime) -> tuple[str, float | None]:
    """A worker's status as every read reports it, and seconds since its last heartbeat:
    ONLINE or DRAINING only while its heartbeats come within its TTL, else OFFLINE
    (RULES.md#claims)."""
    beat = parse_ts_or_none(props.get("heartbeat_at"))
    lag = (now - beat).total_seconds() if beat else None
    status = props.get("status") or "OFFLINE"
    ttl = float(props.get("heartbeat_ttl_seconds") or DEFAULT_HEARTBEAT_TTL_SECONDS)
    if status in ("ONLINE", "DRAINING") and (lag is None or lag > ttl):
        status = "OFFLINE"
    return status, lag


def is_able(worker: dict[str, Any], queue: dict[str, Any]) -> bool:
    """Rostered coverage (RULES.md#metrics): taking work (not draining, disabled or retired)
    and eligible for the queue, online or not. A disabled queue keeps its coverage (who
    could serve it once enabled)."""
    if worker_status_problem(worker):
        return False
    return all(code == "QUEUE_DISABLED" for code, _ in eligibility_problems(worker, queue))


def can_serve(worker: dict[str, Any], computed_status: str, queue: dict[str, Any]) -> bool:
    """Online coverage (RULES.md#metrics): able to serve the queue and online now."""
    return computed_status == WorkerStatus.ONLINE and is_able(worker, queue)


def free_slots(max_concurrent_leases: int, active_leases: int) -> int:
    """How many more leases a worker may take before its lease limit (RULES.md#claims)."""
    return max(0, max_concurrent_leases - active_leases)


def worker_status_problem(worker: dict[str, Any]) -> str | None:
    status = worker.get("status")
    if status in STOPPED_WORKER_STATUSES:
        return f"The worker is {status.lower()}."
    if status == WorkerStatus.DRAINING or worker.get("drain_requested"):
        return "The worker is draining and takes no new work."
    return None


def classify_failure(retryable: bool | None, error_class: str | None) -> RetryClass:
    if error_class:
        cls = RetryClass(error_class)
        if retryable is True and cls not in TRANSIENT_CLASSES:
            raise ValueError(f"{cls} is not a retryable class")
        if retryable is False and cls in TRANSIENT_CLASSES:
            raise ValueError(f"{cls} is a retryable class")
        return cls
    return RetryClass.TRANSIENT_SYSTEM if retryable else RetryClass.PERMANENT_STATE


# Cancelling an item is an operator's decision (RULES.md#retries): a person at the bench
# records what went wrong and leaves the cancel to an operator; a service acting for one may.
CANCEL_ROLES = frozenset({"operator", "admin", "worker_service"})


def failure_classes_for(roles: frozenset[str] | set[str]) -> list[RetryClass]:
    """The retry classes a caller with these roles may record a failure with."""
    return [c for c in RetryClass if c != RetryClass.OPERATOR_CANCELED or roles & CANCEL_ROLES]


def offered_states(config: dict[str, Any]) -> list[str]:
    """The states a queue offers items in (the SQL twin is sql.QUEUES' eligible_states): the
    ones it stores that a queue may offer in (states.ELIGIBLE_STATES), whatever another
    writer stored beside them; a text stored alone is one state."""
    stored = config.get("eligible_states")
    values = [stored] if isinstance(stored, str) else stored if isinstance(stored, list) else []
    return [v for v in values if isinstance(v, str) and v in ELIGIBLE_STATES]


def scope_values(scope: Any) -> list[str] | None:
    """A queue's scope as the texts it admits; None when it admits any (absent, null, [])."""
    if scope is None or scope == []:
        return None
    if isinstance(scope, str):
        return [scope]
    if isinstance(scope, dict):
        return list(scope)
    return [v for v in scope if isinstance(v, str)] if isinstance(scope, list) else []


def named_by_queues(configs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per list of a worker's profile (``capabilities``, ``site_scope``, ``platform_scope``,
    ``assay_scope``), the values the queues configured so name: the steps they ask for and
    what they are scoped to, sorted. What a person's values are checked against (a value no
    queue names is most often a typo) and what a new queue's form offers."""
    named: dict[str, set[str]] = {"capabilities": set(),
                                  **{f"{f}_scope": set() for f in SCOPE_FIELDS}}
    for config in configs:
        # another writer may have stored anything: read as a list of texts as scopes are
        named["capabilities"].update(scope_values(config.get("required_worker_capabilities"))
                                     or [])
        for f in SCOPE_FIELDS:
            named[f"{f}_scope"].update(scope_values(config.get(f"{f}_scope")) or [])
    return {name: sorted(values) for name, values in named.items()}


def scope_problem(config: dict[str, Any], props: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The first of site/platform/assay (sql.SCOPE_FIELDS) whose queue scope this subject's
    property is outside, with the scope's values; None when within every one (the SQL twin
    is sql.scope_match: a property read as text, absent as '')."""
    for field in SCOPE_FIELDS:
        values = scope_values(config.get(f"{field}_scope"))
        if values is None:
            continue
        if property_text(props.get(field)) not in values:
            return field, values
    return None


def as_scoped(config: dict[str, Any], props: dict[str, Any]) -> dict[str, Any]:
    """A new subject's site, platform or assay as the queue's scope spells it when it
    differs only in case ("SFO" for sfo; RULES.md#intake): the people and systems that type
    them read them as one. Any other value is left as given, for scope_problem to judge."""
    out = dict(props)
    for field in SCOPE_FIELDS:
        value = out.get(field)
        if isinstance(value, str):
            out[field] = next((v for v in scope_values(config.get(f"{field}_scope")) or []
                               if v.casefold() == value.casefold()), value)
    return out


# A queue's templates of what its step makes (queue_templates' other list).
OUTPUTS = "output_template_codes"


def queue_templates(config: dict[str, Any], field: str = "subject_template_codes") -> list[str]:
    """A queue's subject_template_codes (or ``field``: output_template_codes) as the texts it
    lists (another writer's 5 or true lists none)."""
    return scope_values(config.get(field)) or []


def takes_template(config: dict[str, Any], template_code: str | None) -> bool:
    """Whether a queue takes subjects of this template (its subject_template_codes): a subject
    of another is never visible in it (RULES.md#visibility), so nothing may send one there."""
    return template_code is not None and template_code in queue_templates(config)


# Settings on unless stored off (Bloom's queue definitions default them to true).
ON_UNLESS_OFF = ("operator_visible", "diagnostics_enabled")


def setting_on(config: dict[str, Any], name: str) -> bool:
    """Whether a queue's yes/no setting is on, as the pages read it (``ON_UNLESS_OFF``)."""
    value = config.get(name)
    return value is not False if name in ON_UNLESS_OFF else bool(value)


def queue_takes(config: dict[str, Any], template_code: str | None,
                props: dict[str, Any]) -> bool:
    """Whether a queue takes this subject sent on to it at all: its template, within its
    scopes, offering items READY (the state it arrives in). What the engine refuses to send
    elsewhere (steps.next_queue_or_refuse), for the pages that offer only the queues it
    would accept."""
    return (takes_template(config, template_code) and scope_problem(config, props) is None
            and "READY" in offered_states(config))


def next_queues_allowed(config: dict[str, Any]) -> list[str] | None:
    """The queues a completed item of this queue may move to (its default next queue first),
    or None when the queue does not limit them (no next_queue_keys configured)."""
    listed = config.get("next_queue_keys")
    if listed is None:
        return None
    default = config.get("default_next_queue_key")
    return list(dict.fromkeys(([default] if default else []) + list(listed)))


def flow_keys(config: dict[str, Any]) -> list[str]:
    """Every queue key a queue's flow sends items to: its default next queue and the
    next_queue_keys it allows, each once (what a rename of one of them must not strand)."""
    named = [config.get("default_next_queue_key"), *(config.get("next_queue_keys") or [])]
    return list(dict.fromkeys(k for k in named if isinstance(k, str) and k))


def flow_warnings(key: str, config: dict[str, Any],
                  queues: dict[str, dict[str, Any]]) -> list[str]:
    """What is allowed in queue ``key``'s flow (``config``, as it would be saved) but most
    often a mistake, in words: a next queue no one has made (a typo sends every completion
    nowhere), or one that takes neither this queue's subjects nor what its steps make (an
    item could never move there). ``queues``: every queue's config by key."""
    said = []
    for next_key in (k for k in flow_keys(config) if k != key):
        target = queues.get(next_key)
        if target is None:
            said.append(f"No queue {next_key} exists yet: completions sent there are refused"
                        " until it does. Check the spelling.")
            continue
        carried = [*queue_templates(config), *queue_templates(config, OUTPUTS)]
        if carried and not any(takes_template(target, code) for code in carried):
            said.append(f"{target.get('display_name') or next_key} takes none of this"
                        " queue's subjects or outputs: no item can move there (give this"
                        " queue output templates it takes, or choose another).")
    if "READY" not in offered_states(config):
        said.append("READY is not among the states this queue offers items in: items sent"
                    " here arrive READY, so intake and every queue before it are refused"
                    " here, and the items waiting here now are offered no more.")
    return said


def attempt_limit(env: dict[str, Any], cfg: dict[str, Any]) -> int:
    """RULES.md#retries: the subject's own limit, else its queue's, else 5; a retryable
    failure that reaches it fails for good, whoever reports it (a worker, an external
    result)."""
    return int(env.get("max_attempts_override") or cfg.get("max_attempts_default") or 5)


# How an attempt ended without failing (its record's status): a release, an expiry, an
# operator's requeue or cancel, a worker stopped. None of these counts toward the limit.
UNCOUNTED_ENDINGS = frozenset({"CANCELED", "EXPIRED"})


def attempt_uncounted(record: dict[str, Any]) -> bool:
    """RULES.md#retries: only a failure counts an attempt (a worker's, of any class, or an
    external one); an attempt that ended otherwise is tried again under the same number."""
    return record.get("status") in UNCOUNTED_ENDINGS and not record.get("error_class")


def retry_delay_seconds(
    policy: dict[str, Any], attempt_count: int, rng: random.Random | None = None
) -> float:
    """Exponential backoff: initial * factor^(attempt-1), capped; optional +-jitter_ratio."""
    initial = float(policy.get("initial_delay_seconds", 60))
    factor = float(policy.get("backoff_factor", 2.0))
    cap = float(policy.get("max_delay_seconds", 3600))
    delay = min(cap, initial * factor ** max(attempt_count - 1, 0))
    jitter = float(policy.get("jitter_ratio") or 0.0)
    if jitter:
        delay *= 1 + (rng or random).uniform(-jitter, jitter)
        delay = min(cap, max(0.0, delay))
    return delay


def retry_at(policy: dict[str, Any], attempt_count: int, now: datetime) -> datetime:
    return now + timedelta(seconds=retry_delay_seconds(policy, attempt_count))


# What bloomops adds to the dispatch of work sent outside (actions/attempts.py writes them,
# after what the worker said of it): when, by which lease, from which queue.
DISPATCH_OWN = ("dispatched_at", "lease_euid", "queue_key")


def waiting_dispatch(state: str | None, props: dict[str, Any]) -> dict[str, Any] | None:
    """The dispatch a subject waits on (RULES.md#reconciliation): its ``external_dispatch``
    while it is WAITING_EXTERNAL. On a subject another writer has moved on (to RUNNING, say)
    it is an earlier step's and says nothing of the work under way now. Its SQL twin is
    ``selectors/workbench._WAITING``."""
    dispatch = props.get("external_dispatch")
    return dispatch if state == "WAITING_EXTERNAL" and isinstance(dispatch, dict) else None
