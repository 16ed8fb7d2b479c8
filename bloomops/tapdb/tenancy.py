"""Tenancy as TapDB writers use it: a deployment's tenant is a UUID, or none at all (NULL in
``tenant_id``, as Bloom writes every row). Queries say ``tenant_id = %(tenant)s``; with no
tenant, ``db`` turns that into ``tenant_id IS NULL`` before running it, so both forms stay
plain btree conditions (``IS NOT DISTINCT FROM`` would not use an index)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings

NO_TENANT = ("", "none", "null")
_TENANT_EQUALS = re.compile(r"\b((?:\w+\.)?tenant_id) = %\(tenant\)s")


def tenant_of(explicit: str | None = None) -> str | None:
    """The tenant a read or write uses: the one given, else the deployment's (None: NULL)."""
    value = explicit if explicit is not None else settings.TAPDB_TENANT_ID
    if value is None or str(value).strip().lower() in NO_TENANT:
        return None
    return str(value)


def for_tenant(sql: str, params: Mapping[str, Any] | Any) -> str:
    """The statement to run for these parameters: ``= %(tenant)s`` becomes ``IS NULL``
    when the tenant is none."""
    if isinstance(params, Mapping) and "tenant" in params and params["tenant"] is None:
        return _TENANT_EQUALS.sub(r"\1 IS NULL", sql)
    return sql


def check_own_tenant(app_configs=None, **kwargs) -> list:
    """`check --deploy`: a lab's objects under the demo's tenant (BLOOMOPS_TENANT_ID unset)
    share it with every other install that left it so, and setting it later hides them all
    (docs/DEPLOY.md)."""
    from django.core import checks

    if settings.TAPDB_TENANT_ID != settings.DEMO_TENANT_ID:
        return []
    return [checks.Warning(
        "BLOOMOPS_TENANT_ID is unset: the lab's objects are written under the demo's tenant,"
        " and a tenant set later hides every one of them.",
        hint="Choose the lab's own UUID once (or `none` on Bloom's rows) and set it for every"
             " process before anything is written (docs/DEPLOY.md).",
        id="bloomops.W003")]
