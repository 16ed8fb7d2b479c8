"""Event counters of the engine, counted where every action passes (the executor), so an
action from the UI, the API or a worker counts alike (RULES.md#metrics). They count events
that write nothing to the database (a refused claim, a replayed request), so they are
process-local Prometheus counters; /metrics exposes them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from bloomops.execution.errors import STALE_CODES
from bloomops.tapdb.tenancy import tenant_of

ALL = "__all__"
# Refusals of a claim that mean "someone else got there first / nothing for you".
CLAIM_CONFLICT_CODES = STALE_CODES | {"NO_WORK", "NOT_VISIBLE", "CONCURRENT_UPDATE"}

EVENTS = CollectorRegistry(auto_describe=True)
CLAIM_CONFLICTS = Counter("claim_conflict", "Claims refused with NO_WORK or a conflict"
                          " (process-local).", ["tenant", "queue"], registry=EVENTS)
REPLAYS = Counter("idempotent_replay", "Requests answered from a stored result (replays,"
                  " process-local).", ["tenant", "queue", "action_key"], registry=EVENTS)


def count_refusal(action_key: str, code: str, queue_key: str | None) -> None:
    if action_key == "claim_queue_item" and code in CLAIM_CONFLICT_CODES:
        CLAIM_CONFLICTS.labels(tenant_of() or "", queue_key or ALL).inc()


def count_replay(action_key: str, queue_key: str | None) -> None:
    REPLAYS.labels(tenant_of() or "", queue_key or ALL, action_key).inc()
