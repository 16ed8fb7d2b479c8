"""The queue overview as JSON and back: what the recorder stores in its snapshot row and every
reader rebuilds (RULES.md#statistics). Generic over the dataclasses' fields, so a field added
to QueueSummary is carried without a change here; a field an older snapshot lacks takes its
default."""

from __future__ import annotations

import dataclasses
from typing import Any

from bloomops.execution.envelope import parse_ts, ts
from bloomops.execution.selectors.overview import Coverage, OutsideWaiting, Overview
from bloomops.execution.selectors.queues import QueueSummary
from bloomops.execution.selectors.workers import WorkerRow


def _encode(obj: Any) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if "datetime" in str(f.type):
            value = ts(value)
        elif isinstance(value, (set, frozenset)):
            value = sorted(value)
        out[f.name] = value
    return out


def _decode(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if "datetime" in str(f.type):
            value = parse_ts(value)
        elif "frozenset" in str(f.type):
            value = frozenset(value or ())
        kwargs[f.name] = value
    return cls(**kwargs)


def encode_overview(ov: Overview, trend: dict[str, list[int]]) -> dict[str, Any]:
    return {
        "now": ts(ov.now),
        "summaries": [_encode(s) for s in ov.summaries],
        "workers": [_encode(w) for w in ov.workers],
        "serving": {key: [w.euid for w in rows] for key, rows in ov.serving.items()},
        "coverage": {key: _encode(c) for key, c in ov.coverage.items()},
        "outside": _encode(ov.outside) if ov.outside else None,
        "trend": trend,
    }


def decode_overview(data: dict[str, Any]) -> tuple[Overview, dict[str, list[int]]]:
    workers = [_decode(WorkerRow, w) for w in data.get("workers", [])]
    by_euid = {w.euid: w for w in workers}
    ov = Overview(
        now=parse_ts(data["now"]),  # type: ignore[arg-type]
        summaries=[_decode(QueueSummary, s) for s in data.get("summaries", [])],
        workers=workers,
        serving={key: [by_euid[e] for e in euids if e in by_euid]
                 for key, euids in data.get("serving", {}).items()},
        coverage={key: _decode(Coverage, c) for key, c in data.get("coverage", {}).items()},
        outside=_decode(OutsideWaiting, data["outside"]) if data.get("outside") else None,
    )
    return ov, {k: list(v) for k, v in data.get("trend", {}).items()}
