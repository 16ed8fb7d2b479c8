"""What one queue's step recorded over a period (RULES.md#results): its completed attempts
with their results, and each declared result field tallied over the whole period. QA's
answer to "every RIN of last week" and "how many failed QC in October". Both read one range
of the index of finished records (`bloomops_record_queue_finished`), so a period costs what
finished in it, never the lab's whole history."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bloomops.execution.envelope import ts
from bloomops.execution.results import BLANK
from bloomops.execution.selectors.base import read_params
from bloomops.tapdb.db import fetch_all

# The completed attempts of %(queue_key)s that finished in [%(since)s, %(until)s): a range of
# bloomops_record_queue_finished (its text order is the engine's fixed-width UTC). Whole days
# start at their midnight; the charts' bars (failures.finished_attempts) count (since, until]
# as the recorder's samples do.
_PERIOD = """
    SELECT r.euid, r.json_addl->'properties' AS p
    FROM generic_instance r
    WHERE r.tenant_id = %(tenant)s AND NOT r.is_deleted
      AND r.type = 'execution' AND r.subtype = 'execution_record'
      AND r.json_addl->'properties'->>'queue_lookup_key' = %(queue_key)s
      AND r.json_addl->'properties'->>'finished_at' >= %(since)s
      AND r.json_addl->'properties'->>'finished_at' < %(until)s
      AND r.json_addl->'properties'->>'status' = 'SUCCEEDED'"""

_RECORDED = f"""
    SELECT r.euid AS record_euid, r.p->>'finished_at' AS finished_at,
           r.p->>'attempt_number' AS attempt, r.p->'result_snapshot' AS result,
           r.p->>'subject_lookup_euid' AS subject_euid, r.p->>'worker_lookup_euid' AS worker_euid,
           w.json_addl->'properties'->>'display_name' AS worker_name,
           s.uid IS NOT NULL AS subject_found, s.name AS subject_name
    FROM ({_PERIOD}
            AND (%(field)s::text IS NULL
                 OR (jsonb_typeof(r.json_addl->'properties'->'result_snapshot'->%(field)s)
                       = 'string'
                     AND r.json_addl->'properties'->'result_snapshot'->>%(field)s = %(value)s))
          ORDER BY r.json_addl->'properties'->>'finished_at' DESC, r.euid DESC
          LIMIT %(limit)s) r
    LEFT JOIN generic_instance s
      ON s.euid = r.p->>'subject_lookup_euid' AND s.tenant_id = %(tenant)s AND NOT s.is_deleted
    LEFT JOIN generic_instance w
      ON w.euid = r.p->>'worker_lookup_euid' AND w.tenant_id = %(tenant)s
    ORDER BY r.p->>'finished_at' DESC, r.euid DESC"""


def _params(queue_key: str, since: datetime, until: datetime, tenant: str | None,
            **extra: Any) -> dict[str, Any]:
    return read_params(None, tenant, queue_key=queue_key, since=ts(since), until=ts(until),
                       **extra)


def results_recorded(queue_key: str, *, since: datetime, until: datetime,
                     tenant: str | None = None, limit: int = 500,
                     said: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """The completed attempts of ``queue_key`` finished in [since, until), newest first (at
    most ``limit``), each with its ``result`` (the result_snapshot as stored: any JSON another
    writer left), its worker's name and its subject's (subject_found false: no longer among
    the tenant's live objects); ``said`` (key, text): only those whose result gave that key
    that text (the QC fails of a week; text only, as the tally counts them). One query."""
    field, value = said or (None, None)
    return fetch_all(_RECORDED, _params(queue_key, since, until, tenant, limit=limit,
                                        field=field, value=value))


# The period's completed attempts counted (a row with key NULL, ``given`` the count), then each
# key of %(keys)s given a value (neither null nor blank text, as results.recorded reads one): a
# row (key, NULL, ...) with how many gave it and the numbers' count, least, greatest, mean and
# median; then, for the keys of %(said_keys)s (a pass/fail's, a choice's), a row (key, said, n)
# for each text value given.
_TALLY = f"""
    WITH r AS MATERIALIZED ({_PERIOD}), v AS (
        SELECT key, v FROM (
            SELECT k.key, r.p->'result_snapshot'->k.key AS v
            FROM r CROSS JOIN unnest(%(keys)s::text[]) AS k(key)
            WHERE jsonb_typeof(r.p->'result_snapshot') = 'object') x
        WHERE jsonb_typeof(v) <> 'null'
          AND NOT (jsonb_typeof(v) = 'string' AND btrim(v #>> '{{}}', %(blank)s) = '')
    ), n AS (
        SELECT key, (v #>> '{{}}')::numeric AS x FROM v WHERE jsonb_typeof(v) = 'number'
    )
    SELECT NULL::text AS key, NULL::text AS said, count(*) AS given, NULL::bigint AS numbers,
           NULL::numeric AS least, NULL::numeric AS greatest, NULL::numeric AS mean,
           NULL::float8 AS median
    FROM r
    UNION ALL
    SELECT g.key, NULL, g.given, n.numbers, n.least, n.greatest, n.mean, n.median
    FROM (SELECT key, count(*) AS given FROM v GROUP BY key) g
    LEFT JOIN (SELECT key, count(*) AS numbers, min(x) AS least, max(x) AS greatest,
                      avg(x) AS mean, percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS median
               FROM n GROUP BY key) n ON n.key = g.key
    UNION ALL
    SELECT key, v #>> '{{}}', count(*), NULL, NULL, NULL, NULL, NULL
    FROM v WHERE jsonb_typeof(v) = 'string' AND key = ANY(%(said_keys)s::text[])
    GROUP BY key, v #>> '{{}}'"""


def results_tally(queue_key: str, keys: list[str], *, said_keys: list[str], since: datetime,
                  until: datetime, tenant: str | None = None) -> list[dict[str, Any]]:
    """Every completed attempt of ``queue_key`` in [since, until) counted (the row whose key
    is NULL), and each of ``keys`` over them: rows ``said`` NULL (how many gave it, and of
    its numbers the count, least, greatest, mean and median) and, for ``said_keys``, a row of
    each text value given with its count (``given``). One query."""
    return fetch_all(_TALLY, _params(queue_key, since, until, tenant, keys=list(keys),
                                     said_keys=list(said_keys), blank=BLANK))


def recorded_under(queue_key: str, keys: list[str], *,
                   tenant: str | None = None) -> dict[str, int]:
    """How many of the queue's completed attempts recorded a value under each of ``keys``:
    what a change of its result fields that renames or drops one leaves under the old key
    (shown apart, as "also recorded"). One query, over the queue's finished records."""
    rows = fetch_all("""
        SELECT k AS key, count(*) AS n
        FROM generic_instance r CROSS JOIN unnest(%(keys)s::text[]) k
        WHERE r.tenant_id = %(tenant)s AND NOT r.is_deleted
          AND r.type = 'execution' AND r.subtype = 'execution_record'
          AND r.json_addl->'properties'->>'queue_lookup_key' = %(queue_key)s
          AND r.json_addl->'properties'->>'status' = 'SUCCEEDED'
          AND r.json_addl->'properties'->'result_snapshot' ? k
        GROUP BY k""", read_params(None, tenant, queue_key=queue_key, keys=keys))
    return {r["key"]: r["n"] for r in rows}
