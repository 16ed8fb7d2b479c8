"""GET /queues/{queue_key}/results: what one queue's step recorded between two instants
(RULES.md#results), for a LIMS or a report: the completed attempts with each result as
stored, and each declared field counted over the whole window, as the console's Results page
reads them."""

# No "from __future__ import annotations": django-ninja reads the endpoint annotations.

from datetime import timedelta
from typing import Any

from ninja import Query, Router, Schema
from pydantic import ConfigDict, Field

from bloomops.api.action_schemas import INSTANT
from bloomops.api.schemas import PathId, query_integer, query_text
from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts, request_ts, ts
from bloomops.execution.errors import ActionError, Problems
from bloomops.execution.results import (
    DEFAULT_DAYS,
    RESULT_KEY_PATTERN,
    SAID_KINDS,
    declared_results,
    said_keys,
)

DEFAULT_WINDOW = timedelta(days=DEFAULT_DAYS)  # the Results page's too


class ResultsQuery(Schema):
    # the key's pattern refuses a final newline by a look-ahead (RESULT_KEY_PATTERN)
    model_config = ConfigDict(regex_engine="python-re")

    since: str | None = Field(None, max_length=64, pattern=INSTANT, description=(
        "From this instant (included); default: a week before until."))
    until: str | None = Field(None, max_length=64, pattern=INSTANT, description=(
        "To this instant (excluded); default: now."))
    limit: query_integer(100, 1, 1000)  # type: ignore[valid-type]
    field: str | None = Field(None, max_length=40, pattern=RESULT_KEY_PATTERN, description=(
        "With value: only the attempts whose result gave this pass/fail or choice field"
        " that value (the QC fails of a week)."))
    value: str | None = query_text(200)


class RecordedOut(Schema):
    execution_record_euid: str
    finished_at: str | None
    subject_euid: str | None
    subject_name: str | None
    attempt: int | None
    worker_euid: str | None
    worker_name: str | None
    result: Any = Field(description="The result_snapshot as stored.")


class FieldTallyOut(Schema):
    key: str
    given: int = Field(description="Attempts of the window that gave a value.")
    numbers: int = Field(description="Of those, values that are numbers.")
    least: float | None
    greatest: float | None
    mean: float | None
    median: float | None
    values: dict[str, int] = Field(description="A pass/fail's or a choice's count of each"
                                   " value given.")


class QueueResultsOut(Schema):
    queue_key: str
    since: str
    until: str
    attempts: int = Field(description="Completed attempts of the window (of the value asked"
                          " for, when one is).")
    complete: bool = Field(description="false: more than limit; narrow the window.")
    result_fields: list[dict[str, Any]]
    tally: list[FieldTallyOut]
    results: list[RecordedOut]


def _window(query: ResultsQuery) -> tuple[Any, Any]:
    problems = Problems()
    moments = {}
    for name in ("since", "until"):
        with problems.field():
            text = getattr(query, name)
            try:
                moments[name] = parse_ts(request_ts(text)) if text else None
            except ValueError as exc:
                raise ActionError("VALIDATION_ERROR", f"{name}: {exc}.", field=name) from exc
    problems.raise_any()
    until = moments["until"] or clock.now()
    since = moments["since"] or until - DEFAULT_WINDOW
    if not since < until:
        raise ActionError("VALIDATION_ERROR", "since must be before until.", field="since")
    return since, until


def _said(query: ResultsQuery, fields: list[dict[str, Any]]) -> tuple[str, str] | None:
    if query.field is None and query.value is None:
        return None
    field = next((f for f in fields if f["key"] == query.field), None)
    if field is None or field["kind"] not in SAID_KINDS:
        raise ActionError("VALIDATION_ERROR", "field must name a pass/fail or choice result"
                          " field the queue declares.", field="field")
    if query.value is None:
        raise ActionError("VALIDATION_ERROR", "value is required with field.", field="value")
    return query.field, query.value


def _number(value: Any) -> float | None:
    """A figure as JSON: a median computed in floating point without its last-digit noise
    (6.7, not 6.699999999999999)."""
    return None if value is None else float(f"{float(value):.12g}")


def _tally(fields: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = {f["key"]: {"key": f["key"], "given": 0, "numbers": 0, "least": None,
                      "greatest": None, "mean": None, "median": None, "values": {}}
           for f in fields}
    for r in rows:
        if r["key"] not in out:
            continue
        if r["said"] is not None:
            out[r["key"]]["values"][r["said"]] = int(r["given"])
        else:
            out[r["key"]].update(given=int(r["given"]), numbers=int(r["numbers"] or 0),
                                 **{k: _number(r[k])
                                    for k in ("least", "greatest", "mean", "median")})
    return list(out.values())


def _attempt(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 10 \
        else None


def add_results_route(router: Router, responses: dict) -> None:
    @router.get("/queues/{queue_key}/results", response={200: QueueResultsOut, **responses},
                summary="What a queue's step recorded between two instants, counted")
    def queue_results(request, queue_key: PathId, query: Query[ResultsQuery]):
        queue = selectors.queue_config(queue_key)
        if queue is None:
            raise ActionError("NOT_FOUND", f"No queue {queue_key!r}.", queue_key=queue_key)
        since, until = _window(query)
        fields = declared_results(queue["config"])
        said = _said(query, fields)
        rows = selectors.results_tally(
            queue_key, [f["key"] for f in fields], since=since, until=until,
            said_keys=said_keys(fields))
        attempts = next((int(r["given"]) for r in rows
                         if (r["key"], r["said"]) == (said or (None, None))), 0)
        found = selectors.results_recorded(queue_key, since=since, until=until,
                                           limit=query.limit + 1, said=said)
        return {
            "queue_key": queue_key, "since": ts(since), "until": ts(until),
            "attempts": attempts, "complete": len(found) <= query.limit,
            "result_fields": fields, "tally": _tally(fields, rows),
            "results": [{
                "execution_record_euid": r["record_euid"], "finished_at": r["finished_at"],
                "subject_euid": r["subject_euid"],
                "subject_name": r["subject_name"] if r["subject_found"] else None,
                "attempt": _attempt(r["attempt"]), "worker_euid": r["worker_euid"],
                "worker_name": r["worker_name"], "result": r["result"],
            } for r in found[:query.limit]],
        }
