"""The parameters every SQL read takes (``%(now)s``, ``%(tenant)s`` in sql.py's fragments).
Outside the selectors package so that a module the selectors import (stats.counting) can
use it without loading every selector first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bloomops.execution import clock
from bloomops.execution.envelope import ts
from bloomops.tapdb.tenancy import tenant_of


def read_params(now: datetime | None, tenant: str | None, **extra: Any) -> dict[str, Any]:
    """``now`` as fixed-width UTC text (envelope.ts), the tenant (the configured one when
    None), and ``extra``."""
    return {"now": ts(now or clock.now()), "tenant": tenant_of(tenant), **extra}
