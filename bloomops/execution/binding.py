"""What in an evidence bundle contradicts its own sealed action records (RULES.md#evidence).

Only action records are sealed; snapshots (an approval, a hold) are stored as they are and an
insider can rewrite one, then export a bundle that matches the database. The sealed records
in that same bundle still say what was done, so the two are held together: an approval's
decision and signature must be the ones its decide_approval record sealed, and no record on
the subject's or an approval's chain may lack its predecessor (an executed_on edge removed
hides a record from the subject's history while its chain stays intact)."""

from __future__ import annotations

import json
from typing import Any

from bloomops.execution.chain import CHAIN

# What a signature says, each sealed in the decision's record (actions/approvals.py).
SIGNATURE_FIELDS = ("meaning", "signer", "signer_name", "signed_at", "method", "reason")


def short(value: Any) -> str:
    """A value as a verdict quotes it: JSON, cut to 80 characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def binding_problems(doc: dict[str, Any]) -> list[str]:
    """The contradictions between a bundle's snapshots and its sealed records, each naming
    the entry and field."""
    records = [e for e in doc.get("action_records") or []
               if isinstance(e, dict) and isinstance(e.get("record"), dict)]
    approvals = [a for a in doc.get("approvals") or [] if isinstance(a, dict)]
    subject = doc.get("subject") if isinstance(doc.get("subject"), dict) else {}
    return (_missing_predecessors(records, {subject.get("euid")}
                                  | {a.get("euid") for a in approvals})
            + _unsealed_decisions(records, approvals))


def _missing_predecessors(records: list[dict], keys: set[Any]) -> list[str]:
    have = {e.get("euid") for e in records}
    problems = []
    for e in records:
        chain = e["record"].get(CHAIN)
        if not isinstance(chain, dict) or chain.get("key") not in keys:
            continue
        previous = chain.get("previous_euid")
        if isinstance(previous, str) and previous not in have:
            problems.append(f"action_records[{e.get('euid')}]: the record before it on"
                            f" {chain.get('key')}'s chain, {previous}, is missing from the"
                            " bundle (removed, or no longer linked to the subject)")
    return problems


def _unsealed_decisions(records: list[dict], approvals: list[dict]) -> list[str]:
    decided: dict[str, dict[str, Any]] = {}
    for e in records:
        result = e["record"].get("result")
        if e["record"].get("action_key") == "decide_approval" and isinstance(result, dict):
            decided[str(result.get("approval_euid"))] = e
    problems = []
    for a in approvals:
        props = a.get("properties") if isinstance(a.get("properties"), dict) else {}
        where = f"approvals[{a.get('euid')}]"
        entry = decided.get(str(a.get("euid")))
        if entry is None:
            if props.get("signature") is not None or props.get("decision") is not None:
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
