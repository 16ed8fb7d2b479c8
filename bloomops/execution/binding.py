"""What in an evidence bundle contradicts its own sealed action records (RULES.md#evidence),
and how a verdict names a difference, field by field.

Only action records are sealed; snapshots (an approval, a hold) are stored as they are and an
insider can rewrite one, then export a bundle that matches the database. The sealed records
in that same bundle still say what was done, so the two are held together: an approval's
decision and signature must be the ones its decide_approval record sealed, and no record on
the subject's or an approval's chain may lack its predecessor (an executed_on edge removed
hides a record from the subject's history while its chain stays intact)."""

from __future__ import annotations

import json
from typing import Any

from bloomops.execution.chain import CHAIN, another_writers, canonical_bytes, sealed_record
from bloomops.execution.guards import load_json
from bloomops.execution.states import DECISIONS, RetryClass

# What a signature says, each sealed in the decision's record (actions/approvals.py).
SIGNATURE_FIELDS = ("meaning", "signer", "signer_name", "signed_at", "method", "reason")


def short(value: Any) -> str:
    """A value as a verdict quotes it: JSON, cut to 80 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def binding_problems(doc: dict[str, Any]) -> list[str]:
    """The contradictions between a bundle's snapshots and its sealed records, each naming
    the entry and field."""
    # any JSON may stand in a file: an entry is named by text, or it names nothing
    records = [e for e in doc.get("action_records") or []
               if isinstance(e, dict) and isinstance(e.get("record"), dict)
               and isinstance(e.get("euid"), str)]
    approvals = [a for a in doc.get("approvals") or []
                 if isinstance(a, dict) and isinstance(a.get("euid"), str)]
    holds = [h for h in doc.get("holds") or []
             if isinstance(h, dict) and isinstance(h.get("euid"), str)]
    subject = doc.get("subject") if isinstance(doc.get("subject"), dict) else {}
    return (_missing_predecessors(records, {subject.get("euid")}
                                  | {a["euid"] for a in approvals})
            + _unsealed_decisions(records, approvals)
            + _unsealed_withdrawals(records, approvals)
            + _unsealed_requests(records, approvals)
            + _unsealed_holds(records, holds)
            + _unsealed_dead_letters(records, [d for d in doc.get("dead_letters") or []
                                               if isinstance(d, dict)])
            + _unsealed_releases(records, holds))


def _by_result(records: list[dict], action_key: str, field: str) -> dict[str, dict]:
    """The records of ``action_key`` by the EUID(s) their result names in ``field``."""
    found: dict[str, dict] = {}
    for e in records:
        result = e["record"].get("result")
        # bloomops' sealed records alone: what they say is what bloomops did (Bloom's own,
        # unsealed, name its holds too, in its own terms; one inserted before the
        # placement named a hold's code otherwise)
        if (e["record"].get("action_key") != action_key or not isinstance(result, dict)
                or not sealed_record(e["record"])):
            continue
        named = result.get(field)
        for euid in named if isinstance(named, list) else [named]:
            if isinstance(euid, str):
                found.setdefault(euid, e)
    return found


def _later_elsewhere(records: list[dict], entry: dict, euid: str) -> bool:
    """Whether another writer's record after ``entry`` names object ``euid`` (Bloom released
    a hold bloomops had ended: the snapshot is Bloom's since)."""
    after = records[records.index(entry) + 1:] if entry in records else []
    return any(another_writers(e["record"]) and euid in (
        _part(e["record"], "result").get("hold_euid"), e["record"].get("target_euid"))
        for e in after)


def _stripped(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _part(record: dict[str, Any], name: str) -> dict[str, Any]:
    value = record.get(name)
    return value if isinstance(value, dict) else {}


# The code of the hold a failure of class BUSINESS_RULE_HOLD places (actions.steps).
FAILURE_HOLD_CODE = RetryClass.BUSINESS_RULE_HOLD.value


def sealed_hold_code(record: dict[str, Any]) -> str | None:
    """The hold code a place_execution_hold record sealed as asked (None: it asked none, the
    lab's default then)."""
    code = _part(record, "captured_data").get("hold_code")
    return code.strip().upper() if isinstance(code, str) and code.strip() else None


def request_disagreements(props: dict[str, Any],
                          record: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, the approval's, the request's sealed record's) for each field where an
    approval says otherwise than the record of its request: who asked, when, why, the
    subject, the action and (sealed since) the terms signed for. The one rule of both the
    decision (actions/approvals.sealed_requester) and a bundle's verdict."""
    result = _part(record, "result")
    terms = _part(result, "terms")
    said = [("requested_by", record.get("executed_by")),
            ("requested_at", record.get("executed_at")),
            ("reason", _stripped(_part(record, "captured_data").get("reason"))),
            ("subject_lookup_euid", record.get("subject_lookup_euid")),
            # asked before the terms were sealed: the action, as that record says it
            ("action_key", terms.get("action_key", result.get("gated_action_key"))),
            *terms.items()]
    return [(name, props.get(name), want) for name, want in dict(said).items()
            if props.get(name) != want]


def _unsealed_requests(records: list[dict], approvals: list[dict]) -> list[str]:
    """Who asked, when and why, and the terms signed for (sealed since they were), must be
    those the request's record sealed: a requester renamed in the database could otherwise
    have decided their own request, unseen."""
    asked = _by_result(records, "request_approval", "approval_euid")
    problems = []
    for a in approvals:
        entry = asked.get(a["euid"])
        if entry is None:
            continue
        problems += [f"approvals[{a['euid']}].properties.{name}: the approval says"
                     f" {short(mine)}, its sealed request {entry['euid']} says {short(want)}"
                     for name, mine, want in request_disagreements(_part(a, "properties"),
                                                                   entry["record"])]
    return problems


def _unsealed_releases(records: list[dict], holds: list[dict]) -> list[str]:
    """Who ended a hold, when, why and on whose approval must be what the record that ended
    it (a release, or a cancel) sealed."""
    released = _by_result(records, "release_execution_hold", "hold_euids")
    canceled = _by_result(records, "cancel_subject_execution", "holds_ended")
    problems = []
    for h in holds:
        props = _part(h, "properties")
        entry = released.get(h["euid"]) or canceled.get(h["euid"])
        if entry is None or _later_elsewhere(records, entry, h["euid"]):
            continue
        record = entry["record"]
        why = _stripped(_part(record, "captured_data").get("reason"))
        if entry is not released.get(h["euid"]) and isinstance(why, str):
            why = "Ended by cancel: " + why
        approval = record["result"].get("approval")
        said = [("released_by_lookup_euid", record.get("executed_by")),
                ("released_at", record.get("executed_at")), ("release_reason", why)]
        if "released_on_approval" in props or not isinstance(approval, dict):
            # kept on the hold since a while: a hold released on approval before has none
            said.append(("released_on_approval", {
                "approval_euid": approval.get("approval_euid"),
                "requested_by": approval.get("requested_by")}
                if isinstance(approval, dict) else None))
        problems += [f"holds[{h['euid']}].properties.{name}: the hold says"
                     f" {short(props.get(name))}, its sealed record {entry['euid']} says"
                     f" {short(want)}" for name, want in said
                     if _stripped(props.get(name)) != want]
    return problems


def _missing_predecessors(records: list[dict], keys: set[Any]) -> list[str]:
    have = {e.get("euid") for e in records}
    problems = []
    for e in records:
        chain = e["record"].get(CHAIN)
        if not isinstance(chain, dict) or not isinstance(chain.get("key"), str) \
                or chain["key"] not in keys:
            continue
        previous = chain.get("previous_euid")
        if isinstance(previous, str) and previous not in have:
            problems.append(f"action_records[{e.get('euid')}]: the record before it on"
                            f" {chain.get('key')}'s chain, {previous}, is missing from the"
                            " bundle (removed, or no longer linked to the subject)")
    return problems


def _unsealed_decisions(records: list[dict], approvals: list[dict]) -> list[str]:
    # an approval is decided once (a second decision is refused): its one sealed record
    decided = _by_result(records, "decide_approval", "approval_euid")
    problems = []
    for a in approvals:
        props = a.get("properties") if isinstance(a.get("properties"), dict) else {}
        where = f"approvals[{a.get('euid')}]"
        entry = decided.get(str(a.get("euid")))
        if entry is None:
            if props.get("status") in DECISIONS or any(props.get(name) is not None for name in (
                    "signature", "decision", "decided_by", "decided_at")):
                problems.append(f"{where}: carries a decision, but no sealed record of that"
                                " decision is in the bundle")
            continue
        record, sealed_by = entry["record"], f"its sealed decision {entry.get('euid')}"
        sealed, stored = record["result"].get("signature"), props.get("signature")
        if not isinstance(sealed, dict) or not isinstance(stored, dict):
            problems.append(f"{where}.signature: not the signature {sealed_by} carries")
            continue
        said = [(f"signature.{name}", stored.get(name), sealed.get(name))
                for name in SIGNATURE_FIELDS]
        captured = record.get("captured_data")
        said += [("decided_by", props.get("decided_by"), record.get("executed_by")),
                 ("decided_at", props.get("decided_at"), record.get("executed_at")),
                 ("decision", props.get("decision"),
                  captured.get("decision") if isinstance(captured, dict) else None)]
        problems += [f"{where}.{name}: the approval says {short(mine)}, {sealed_by}"
                     f" says {short(want)}" for name, mine, want in said if mine != want]
    return problems


def _unsealed_withdrawals(records: list[dict], approvals: list[dict]) -> list[str]:
    """Who withdrew a request, when and why must be what the cancel_approval record that
    withdrew it sealed; a request read withdrawn that none withdrew was ended outside."""
    withdrawn: dict[str, dict[str, Any]] = {}
    for e in records:
        captured = _part(e["record"], "captured_data")
        if e["record"].get("action_key") == "cancel_approval" and sealed_record(e["record"]):
            withdrawn.setdefault(str(captured.get("approval_euid")), e)
    problems = []
    for a in approvals:
        props = _part(a, "properties")
        where, entry = f"approvals[{a.get('euid')}]", withdrawn.get(str(a.get("euid")))
        if props.get("status") != "CANCELED" and props.get("canceled_by") is None:
            continue
        if entry is None:
            problems.append(f"{where}: reads withdrawn, but no sealed record of its"
                            " withdrawal is in the bundle")
            continue
        record = entry["record"]
        said = [("canceled_by", props.get("canceled_by"), record.get("executed_by")),
                ("canceled_at", props.get("canceled_at"), record.get("executed_at")),
                ("cancel_reason", _stripped(props.get("cancel_reason")),
                 _stripped(_part(record, "captured_data").get("reason")))]
        problems += [f"{where}.{name}: the approval says {short(mine)}, its sealed withdrawal"
                     f" {entry.get('euid')} says {short(want)}"
                     for name, mine, want in said if mine != want]
    return problems


def _unsealed_dead_letters(records: list[dict], letters: list[dict]) -> list[str]:
    """What a dead letter says of the failure that made it (its class, its words) must be
    what that failure's record sealed (``result.dead_letter``; older records sealed none)."""
    made: dict[str, dict] = {}
    for e in records:
        result = _part(e["record"], "result")
        if sealed_record(e["record"]) and isinstance(result.get("dead_letter"), dict):
            made.setdefault(str(result.get("dead_letter_euid")), e)
    problems = []
    for d in letters:
        entry = made.get(str(d.get("euid")))
        if entry is None:
            continue
        sealed, props = entry["record"]["result"]["dead_letter"], _part(d, "properties")
        problems += [f"dead_letters[{d.get('euid')}].properties.{name}: the letter says"
                     f" {short(props.get(name))}, its sealed record {entry['euid']} says"
                     f" {short(sealed.get(name))}" for name in ("error_class", "error_message")
                     if props.get(name) != sealed.get(name)]
    return problems


def _unsealed_holds(records: list[dict], holds: list[dict]) -> list[str]:
    """A hold's code, reason, placer and time must be those its place_execution_hold record
    sealed (a failure's hold: its placer, time and the engine's code): the code decides
    whether releasing it needs a second person."""
    placed = _by_result(records, "place_execution_hold", "hold_euid")
    failed = _by_result(records, "fail_queue_execution", "hold_euid")
    problems = []
    for h in holds:
        entry = placed.get(h["euid"]) or failed.get(h["euid"])
        if entry is None:  # placed by another writer
            continue
        props, record = _part(h, "properties"), entry["record"]
        said = [("placed_by_lookup_euid", props.get("placed_by_lookup_euid"),
                 record.get("executed_by")),
                ("placed_at", props.get("placed_at"), record.get("executed_at"))]
        if entry is placed.get(h["euid"]):
            code = sealed_hold_code(record)
            said.append(("reason", props.get("reason"),
                         _stripped(_part(record, "captured_data").get("reason"))))
        else:  # a failure's hold: the engine's own code, always
            code = FAILURE_HOLD_CODE
        if code is not None:
            said.append(("hold_code", props.get("hold_code"), code))
        problems += [f"holds[{h['euid']}].properties.{name}: the hold says {short(mine)}, its"
                     f" sealed record {entry['euid']} says {short(want)}"
                     for name, mine, want in said if mine != want]
    return problems


# How a verdict names a difference (evidence._compare), field by field.
def first_difference(path: str, mine: Any, theirs: Any) -> str | None:
    if isinstance(mine, dict) and isinstance(theirs, dict):
        # a record's seal last: re-sealed, what was changed is named, not the new sha256
        for k in sorted(set(mine) | set(theirs), key=lambda k: (k == CHAIN, k)):
            found = first_difference(f"{path}.{k}", mine.get(k), theirs.get(k))
            if found:
                return found
        return None
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            found = first_difference(f"{path}[{i}]", a, b)
            if found:
                return found
        return None
    if isinstance(mine, str) and isinstance(theirs, str):
        # an audit row's values are JSON texts: the field that differs inside is named
        inner = _json_object(mine), _json_object(theirs)
        if inner[0] is not None and inner[1] is not None:
            found = first_difference(path, *inner)
            if found or mine == theirs:
                return found
            # the same JSON written otherwise is still not the text the database holds
        if mine != theirs:
            # two long texts cut at 80 read alike: shown from a little before they part
            at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False))
                       if a != b), min(len(mine), len(theirs)))
            start = max(0, at - 20)
            if start:
                return (f"{path} (from character {start + 1}): the file has"
                        f" {short('…' + mine[start:])}, the database"
                        f" {short('…' + theirs[start:])}")
    if canonical_bytes(mine) == canonical_bytes(theirs):
        return None
    return f"{path}: the file has {short(mine)}, the database {short(theirs)}"


def _json_object(text: str) -> dict | None:
    """A JSON object inside a text, read as every outside JSON is (guards.load_json: a file's
    2,000-deep nest inside an audit value raised RecursionError, a 500)."""
    if not text.startswith("{"):
        return None
    try:
        value = load_json(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
