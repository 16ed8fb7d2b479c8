"""Helpers for engine tests: build queues, subjects and workers, and call the executor."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import connection, transaction

from bloomops.execution.envelope import new_envelope
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionRequest, Actor, execute
from bloomops.execution.objects import load, queue_properties
from bloomops.tapdb.db import fetch_value
from bloomops.tapdb.instances import create_instance

SPECIMEN = "content/material/specimen/1.0"
_keys = itertools.count(1)


def key(prefix: str = "k") -> str:
    return f"{prefix}-{next(_keys)}"


def actor(*roles: str, username: str | None = None) -> Actor:
    name = username or "-".join(roles) or "nobody"
    user, _ = User.objects.get_or_create(username=name)
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return Actor(username=name, roles=frozenset(roles))


SERVICE = ("worker_service",)
# Who gave a test's API token and why, as every token given is recorded (accounts/tokens.py).
GIVEN = {"by": "(a test)", "reason": "the test's own token"}


def make_queue(queue_key: str = "q1", **config: Any) -> dict:
    config.setdefault("display_name", queue_key)
    config.setdefault("subject_template_codes", [SPECIMEN])
    created = create_instance(
        "data/execution/queue/1.0", name=queue_key,
        properties=queue_properties(queue_key=queue_key, **config),
    )
    return {"uid": created.uid, "euid": created.euid, "queue_key": queue_key}


def make_subject(queue_key: str | None = "q1", *, code: str = SPECIMEN, name: str = "s",
                 props: dict | None = None, **envelope: Any) -> str:
    envelope.setdefault("state", "READY")
    envelope.setdefault("next_queue_key", queue_key)
    properties = {"site": "sfo", "platform": "illumina", "assay": "wgs", **(props or {})}
    properties["execution"] = new_envelope(**envelope)
    return create_instance(code, name=name, properties=properties).euid


def act(action_key: str, who: Actor, **fields: Any):
    fields.setdefault("idempotency_key", key(action_key))
    payload = fields.pop("payload", {})
    return execute(ActionRequest(action_key=action_key, actor=who, payload=payload, **fields))


def register(who: Actor, worker_key: str | None = None, **payload: Any) -> str:
    """A worker of ``who``. A HUMAN_SESSION worker's key and profile are the person's own
    (derived and configured), so none is sent for one."""
    payload.setdefault("worker_type", "SERVICE")
    if payload["worker_type"] != "HUMAN_SESSION":
        payload.setdefault("capabilities", [])
        payload["worker_key"] = worker_key or key("w")
    result = act("register_worker", who, payload=payload)
    return result["worker_euid"]


def claim(who: Actor, worker_euid: str, queue_key: str | None = "q1", **fields: Any):
    return act("claim_queue_item", who, worker_euid=worker_euid, queue_key=queue_key, **fields)


def envelope(euid: str) -> dict:
    obj = load(euid=euid, tenant=_tenant())
    assert obj is not None
    return obj.envelope


def uid(euid: str) -> int:
    """The row id lineage helpers (tapdb.instances.children, parents) take."""
    obj = load(euid=euid, tenant=_tenant())
    assert obj is not None
    return obj.uid


def props(euid: str) -> dict:
    obj = load(euid=euid, tenant=_tenant())
    assert obj is not None
    return obj.props


def _tenant() -> str:
    from django.conf import settings

    return settings.TAPDB_TENANT_ID


def counts() -> dict[str, int]:
    """Row counts of every TapDB table: "nothing was written" is these being unchanged."""
    return {
        table: fetch_value(f"SELECT count(*) FROM {table}")
        for table in ("generic_instance", "generic_instance_lineage", "audit_log", "outbox_event")
    }


def refused(code: str, attempt: Callable[[], Any]) -> ActionError:
    """The engine's refusal of ``attempt``, with ``code``, having written nothing."""
    import pytest

    before = counts()
    with pytest.raises(ActionError) as err:
        attempt()
    assert err.value.code == code, err.value.as_dict()
    assert counts() == before
    return err.value


@contextmanager
def locked_elsewhere(lock: Callable[[], Any]) -> Iterator[None]:
    """While the block runs, another connection's open transaction holds what ``lock``
    locked (committed data: the ``committed`` fixture)."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            lock()
            locked.set()
            release.wait(10)
        connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert locked.wait(10)
        yield
    finally:
        release.set()
        thread.join()
