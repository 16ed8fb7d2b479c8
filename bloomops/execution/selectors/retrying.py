"""The QA workbench's retrying items: subjects that failed and will be tried again
(RULES.md#retries), where QA may retry now, hold or cancel them."""

from __future__ import annotations

from typing import Any

from bloomops.execution.selectors.base import read_params
from bloomops.execution.sql import ENV, HELD_BY_ENVELOPE, ROUTED, SUBJECT_REVISION, TERMINAL
from bloomops.tapdb.db import fetch_all


def retrying_items(*, tenant: str | None = None, queue_key: str | None = None,
                   limit: int = 500) -> list[dict[str, Any]]:
    """FAILED_RETRYABLE subjects not held (holds have their own list), oldest retry first,
    with the last attempt's error (``props``, as a dead letter row has). One query."""
    return fetch_all(
        f"""
        SELECT s.euid AS subject_euid, s.name AS subject_name,
               {ENV}->>'state' AS subject_state, {SUBJECT_REVISION} AS subject_revision,
               {ENV}->>'next_queue_key' AS queue_key, {ENV}->>'retry_at' AS retry_at,
               {ENV}->>'attempt_count' AS attempt_count,
               jsonb_build_object(
                   'error_class', r.json_addl->'properties'->>'error_class',
                   'error_message', r.json_addl->'properties'->>'error_message') AS props
        FROM generic_instance s
        LEFT JOIN generic_instance r ON r.euid = {ENV}->>'last_execution_record_euid'
             AND NOT r.is_deleted
        WHERE s.tenant_id = %(tenant)s AND {ROUTED}
          AND {ENV}->>'state' = 'FAILED_RETRYABLE' AND NOT {TERMINAL} AND NOT {HELD_BY_ENVELOPE}
          AND (%(queue_key)s::text IS NULL OR {ENV}->>'next_queue_key' = %(queue_key)s)
        ORDER BY {ENV}->>'retry_at' NULLS FIRST, s.uid LIMIT %(limit)s
        """,
        read_params(None, tenant, queue_key=queue_key, limit=limit),
    )
