"""Guards every action passes before and around its handler: request fields and payload
(RULES.md#requests), the envelope's validity (RULES.md#envelope), expected state and
revision, the lease as credential (RULES.md#leases) and who controls a worker
(RULES.md#human-workers). Each raises ActionError; nothing is written."""


from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from bloomops.execution import clock
from bloomops.execution.context import ENVELOPE_FIELDS, ActionRequest, Actor, Context
from bloomops.execution.envelope import envelope_problems
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import LEASE, REL, Obj, is_kind, is_subject, load, parent_of
from bloomops.execution.people import username_of_human_key
from bloomops.execution.policy import lease_effective_status

# The largest payload an action stores (its canonical JSON), and how deep it may nest: an
# action record is evidence, not a file store (RULES.md#requests).
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_PAYLOAD_DEPTH = 8
# How deep any JSON we read may nest: a request nests its payload's 8 levels in a few more,
# an evidence bundle its records' in a few more. Deeper, pydantic cannot serialize it (255)
# nor Python's json parse it (about 1,000), each an error no caller should meet as a 500.
MAX_JSON_DEPTH = 64
# Longer integers are no count or revision PostgreSQL's bigint holds (Python would refuse
# past 4,300 digits with advice about its own settings).
MAX_INTEGER_DIGITS = 40
LARGEST_NUMBER = 10**MAX_INTEGER_DIGITS


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice[:60]!r} is given twice")
    return value


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows; send a finite number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large to be a finite number")
    try:
        exact = Decimal(text)
        whole = exact == exact.to_integral_value()
    except ArithmeticError:  # an exponent beyond Decimal's range (0e-99999999999999999999)
        raise ValueError(f"{text[:40]} has an exponent no stored number keeps") from None
    if value.is_integer() and not whole:
        # 998.99999999999999 and 1e-400 read as 999 and 0: taken where a whole number is
        # asked (a priority, a revision), as neither was sent
        raise ValueError(f"{text[:40]} is not a whole number, but would be kept as one"
                         f" ({int(value)}): send it with fewer digits")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer has more than {MAX_INTEGER_DIGITS} digits")
    return int(text)


# PostgreSQL keeps a number as the integer its digits spell: past 40 digits, no bundle's
# reader (MAX_INTEGER_DIGITS) would take the record back.
NUMBERS_BELOW = "numbers are below 1e40"


def too_large(number: int | float) -> bool:
    """A number no record keeps: infinite, or not below LARGEST_NUMBER (NUMBERS_BELOW)."""
    return not math.isfinite(number) or abs(number) >= LARGEST_NUMBER


def nesting_depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((inner, depth) for inner in
                         (item.values() if isinstance(item, dict) else item))
    return deepest


def load_json(data: bytes | str) -> Any:
    """JSON as bloomops reads it from outside (a request body, a form's JSON, a bundle file):
    UTF-8 without a byte-order mark, no key twice (the reader would act on one of them, the
    sender may mean the other), only finite numbers, nesting up to MAX_JSON_DEPTH, and no
    string or key that no stored text can be (TextProblem). Raises ValueError saying why."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("it is not UTF-8 text") from None
    if data.startswith("\ufeff"):
        raise ValueError("it starts with a byte-order mark")
    try:
        value = json.loads(data, object_pairs_hook=_object, parse_constant=_constant,
                           parse_float=_float, parse_int=_int)
    except RecursionError:
        raise ValueError(f"it nests deeper than {MAX_JSON_DEPTH} levels") from None
    if nesting_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"it nests deeper than {MAX_JSON_DEPTH} levels")
    found = first_text_problem(value)
    if found:
        raise TextProblem(*found)
    return value


class TextProblem(ValueError):
    """A string or key of a JSON document no text can be (text_problem): ``where`` names it
    by its path, as a request's field."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where} {problem}")
        self.where, self.problem = where, problem


def first_text_problem(value: Any) -> tuple[str, str] | None:
    """(where, why) of the first string or key in ``value`` that no stored text can be
    (text_problem), or None. UTF-8 holds no surrogate, but a \\ud800 escape decodes to one,
    which nothing downstream (a bundle's canonical form, a log line, the database) can
    encode again. Iterative: load_json bounds the depth, but a checker needs no stack."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            if problem := text_problem(item):
                return at or "body", problem
        elif isinstance(item, dict):
            for key, inner in item.items():
                if problem := text_problem(key):
                    return (f"{at} key" if at else "key"), problem
                stack.append((inner, f"{at}.{key[:40]}" if at else key[:40]))
        elif isinstance(item, list):
            stack.extend((inner, f"{at}[{i}]") for i, inner in enumerate(item))
    return None


def check_payload(payload: Any, fields: tuple[str, ...]) -> None:
    """Refuse what must never be stored: unknown payload keys, values PostgreSQL or JSON
    cannot hold faithfully (NUL, lone surrogates, NaN/Infinity), and oversize or deep nests."""
    if not isinstance(payload, dict):
        raise ActionError("VALIDATION_ERROR", "payload must be an object.", field="payload")
    unknown = sorted(str(k)[:60] for k in payload if k not in fields)
    if unknown:
        # named up to a point: 60,000 unknown keys made a 1 MB refusal of a 649 KB request
        shown, more = unknown[:20], len(unknown) - 20
        raise ActionError("VALIDATION_ERROR", "Unknown payload field(s): " + ", ".join(shown)
                          + (f" and {more} more" if more > 0 else "")
                          + (". Allowed: " + ", ".join(fields) if fields else
                             ". This action takes no payload fields") + ".",
                          field="payload", unknown_fields=shown,
                          unknown_count=len(unknown))
    _check_json(payload, "payload", 0)
    try:
        size = len(json.dumps(payload, allow_nan=False, ensure_ascii=False).encode())
    except (ValueError, UnicodeEncodeError):
        raise ActionError("VALIDATION_ERROR", "payload holds a value JSON cannot carry.",
                          field="payload") from None
    if size > MAX_PAYLOAD_BYTES:
        raise ActionError("VALIDATION_ERROR", f"payload is too large ({size} bytes;"
                          f" {MAX_PAYLOAD_BYTES} max).", field="payload")


def check_not_applicable(req: ActionRequest, names: tuple[str, ...]) -> None:
    sent = [n for n in names if getattr(req, n) is not None]
    if sent:
        raise ActionError("VALIDATION_ERROR", f"{sent[0]} does not apply to"
                          f" {req.action_key}: the action does not use it, so nothing would"
                          " check it.", field=sent[0], not_applicable=sent)


REQUEST_TEXT_FIELDS = tuple(f for f in ENVELOPE_FIELDS if f != "expected_revision")


def check_request_fields(req: ActionRequest) -> None:
    for name in REQUEST_TEXT_FIELDS:
        value = getattr(req, name)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > 200:
            raise ActionError("VALIDATION_ERROR", f"{name} must be text of at most 200"
                              " characters.", field=name)
        _check_text(value, name)
    _check_text(req.idempotency_key, "idempotency_key")
    revision = req.expected_revision
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)
                                 or not 0 <= revision <= 2**31):
        raise ActionError("VALIDATION_ERROR", "expected_revision must be a whole number"
                          f" from 0 to {2**31}.", field="expected_revision")


def text_problem(value: str) -> str | None:
    """Why a text cannot be stored (PostgreSQL refuses NUL; a lone surrogate is not Unicode),
    or None. The API checks every string of a request with this before parsing further."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone UTF-16 surrogate)"
    return None


def _check_text(value: str, where: str) -> None:
    problem = text_problem(value)
    if problem:
        raise ActionError("VALIDATION_ERROR", f"{where} {problem}.", field=where)


def _check_json(value: Any, where: str, depth: int) -> None:
    if depth > MAX_PAYLOAD_DEPTH:
        raise ActionError("VALIDATION_ERROR", f"{where} is nested too deeply"
                          f" ({MAX_PAYLOAD_DEPTH} levels max).", field=where)
    if isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ActionError("VALIDATION_ERROR", f"{where} must be a finite number.", field=where)
    elif isinstance(value, int | float) and not isinstance(value, bool) and too_large(value):
        raise ActionError("VALIDATION_ERROR", f"{where} is too large: {NUMBERS_BELOW}"
                          " (send a larger one as text).", field=where)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ActionError("VALIDATION_ERROR", f"{where} keys must be text.", field=where)
            _check_text(key, where)
            _check_json(item, f"{where}.{key[:40]}", depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]", depth + 1)
    elif value is not None and not isinstance(value, bool | int | float):
        raise ActionError("VALIDATION_ERROR", f"{where} holds a value JSON cannot carry.",
                          field=where)


def guard_envelope(ctx: Context, handler: Any) -> None:
    """A subject whose stored envelope another writer broke is refused by every action except
    the operator's way out (requeue, cancel), which rebuilds the bad fields from defaults."""
    assert ctx.subject is not None
    raw = ctx.subject.props.get("execution")
    problems = envelope_problems(raw) if raw is not None else []
    if not problems:
        return
    if not handler.repairs_envelope:
        raise ActionError("INVALID_ENVELOPE", "The subject's execution envelope cannot be used: "
                          + "; ".join(p for _, p in problems) + ".",
                          subject_euid=ctx.subject.euid, fields=[f for f, _ in problems])
    ctx.env_changed = True
    ctx.result["repaired_fields"] = [f for f, _ in problems]


def guard_subject(ctx: Context, *, allowed_states: bool = True) -> None:
    """The state and revision the caller expected, whenever the action has its subject;
    ``allowed_states``: also the states the action's template runs from."""
    req, subject = ctx.request, ctx.subject
    assert subject is not None and ctx.env is not None
    state = ctx.env["state"]
    if req.expected_state is not None and req.expected_state != state:
        raise ActionError(
            "STATE_CONFLICT",
            details_state(req.expected_state, state),
            expected_state=req.expected_state,
            current_state=state,
        )
    revision = int(ctx.env.get("revision") or 0)
    if req.expected_revision is not None and int(req.expected_revision) != revision:
        raise ActionError(
            "REVISION_CONFLICT",
            f"This subject changed after you last read it (revision {req.expected_revision}"
            f" expected, now {revision}).",
            expected_revision=req.expected_revision,
            current_revision=revision,
        )
    if allowed_states and state not in ctx.spec.runs_from:
        if state == "HELD":
            raise ActionError("SUBJECT_HELD", current_state=state)
        raise ActionError(
            "STATE_CONFLICT",
            f"{ctx.spec.name} is not allowed from state {state}.",
            current_state=state,
            allowed_states=list(ctx.spec.runs_from),
        )


def details_state(expected: str, current: str) -> str:
    return (
        f"This subject changed after you last read it: it is {current}, not {expected}."
    )


def guard_lease(ctx: Context) -> None:
    """RULES.md#leases: the lease is lineage-linked to subject and worker, active, unexpired,
    and the caller controls the worker."""
    req = ctx.request
    lease = load(euid=req.lease_euid, tenant=ctx.tenant, lock=True) if req.lease_euid else None
    if req.now is None:  # judged at a time read after the wait for its lock (executor.py)
        ctx.now = clock.now()
    if not is_kind(lease, LEASE):
        raise ActionError("NOT_FOUND", "No such lease.", lease_euid=req.lease_euid)
    assert lease is not None
    ctx.lease = lease
    if ctx.subject is not None and not _linked(ctx.subject, lease, "subject_lease"):
        raise ActionError("LEASE_NOT_OWNED", "This lease is not a lease of that subject.",
                          lease_euid=lease.euid)
    if ctx.subject is None and req.subject_euid:
        # an action that does not load its subject (a renewal) still names the right one
        leased = ctx.leased_subject or parent_of(lease.uid, REL["subject_lease"],
                                                 tenant=ctx.tenant)
        if leased is None or leased.euid != req.subject_euid:
            raise ActionError("LEASE_NOT_OWNED", "This lease is not a lease of that subject.",
                              lease_euid=lease.euid, subject_euid=req.subject_euid)
    worker = parent_of(lease.uid, REL["worker_lease"], tenant=ctx.tenant)
    if req.worker_euid and (worker is None or worker.euid != req.worker_euid):
        raise ActionError("LEASE_NOT_OWNED", lease_euid=lease.euid, worker_euid=req.worker_euid)
    if worker is None:
        raise ActionError("LEASE_NOT_OWNED", "The lease has no worker.", lease_euid=lease.euid)
    ctx.worker = worker
    ensure_controls_worker(ctx.actor, worker)
    status = lease_effective_status(lease.props, ctx.now_ts)
    if status == "EXPIRED":
        # how it ended, as LEASE_NOT_ACTIVE says it: an admin's force-expiry or its time
        raise ActionError("LEASE_EXPIRED", lease_euid=lease.euid,
                          expires_at=lease.props.get("expires_at"), lease_status=status,
                          released_at=lease.props.get("released_at"),
                          release_reason=lease.props.get("release_reason"))
    if status != "ACTIVE":
        raise lease_not_active(lease, status)


def lease_not_active(lease: Obj, status: str) -> ActionError:
    """The refusal of an action on a claim that has ended: how and when (bench words tell a
    person which of their own actions ended it)."""
    return ActionError("LEASE_NOT_ACTIVE", lease_euid=lease.euid, lease_status=status,
                       released_at=lease.props.get("released_at"),
                       release_reason=lease.props.get("release_reason"))


def _linked(parent: Obj, child: Obj, rel: str) -> bool:
    from bloomops.execution.objects import linked

    return linked(parent.uid, child.uid, REL[rel])


def ensure_controls_worker(actor: Actor, worker: Obj) -> None:
    """Workers act only through their own worker object (RULES.md#leases,
    RULES.md#human-workers); admins may override."""
    if actor.is_admin:
        return
    if worker.props.get("worker_type") == "HUMAN_SESSION":
        # A person's worker is theirs by its key, whoever registered it first.
        owner = username_of_human_key(worker.props.get("worker_key") or "")
    else:
        owner = worker.props.get("owner_username")
    if not owner:
        raise ActionError("LEASE_NOT_OWNED", "This worker was registered by another system and"
                          " has no owner here; only an admin may act through it.",
                          worker_euid=worker.euid)
    if owner != actor.username:
        raise ActionError("LEASE_NOT_OWNED", "This worker belongs to another user.",
                          worker_euid=worker.euid)


def lock_subject(ctx: Context, euid: str | None) -> None:
    if not euid:
        raise ActionError("VALIDATION_ERROR", "subject_euid is required.", field="subject_euid")
    subject = load(euid=euid, tenant=ctx.tenant, lock=True)
    if subject is None:
        raise ActionError("NOT_FOUND", "No such subject.", subject_euid=euid)
    if not is_subject(subject):
        # as every read answers for it (GET /subjects/{euid}): not a subject at all
        raise ActionError("NOT_FOUND", "No such subject: that object is the engine's own (or"
                          " a worker), not a work-bearing subject.", subject_euid=euid)
    ctx.subject = subject
    ctx.target = subject
