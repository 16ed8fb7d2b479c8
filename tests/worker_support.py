"""Helpers for worker tests: demo queues in the test tenant, an HTTP transport through
Django's test client, and a DATABASE_URL for worker subprocesses."""

from __future__ import annotations

from urllib.parse import quote

from django.db import connection
from django.test import Client

from bloomops.demo.data import DEMO_QUEUES
from bloomops.execution.objects import load, queue_properties
from bloomops.execution.selectors import lineage_of, subject_history
from bloomops.tapdb.instances import create_instance
from bloomops.worker.transport import HttpTransport


def demo_queues() -> None:
    for spec in DEMO_QUEUES:
        create_instance("data/execution/queue/1.0", name=spec["display_name"],
                        properties=queue_properties(**spec))


def client_transport(token: str) -> HttpTransport:
    client = Client()

    def send(method, url, body, headers):
        path = url.replace("http://testserver", "")
        auth = headers["Authorization"]
        if method == "GET":
            r = client.get(path, HTTP_AUTHORIZATION=auth)
        else:
            r = client.post(path, body, content_type="application/json",
                            HTTP_AUTHORIZATION=auth)
        return r.status_code, r.content

    return HttpTransport("http://testserver", token, send=send)


def database_url() -> str:
    d = connection.settings_dict
    query = f"host={quote(d['HOST'])}" + (f"&port={d['PORT']}" if d["PORT"] else "")
    return (f"postgresql://{quote(d['USER'])}:{quote(d['PASSWORD'] or '')}@/{d['NAME']}"
            f"?{query}")


def history(euid: str) -> dict:
    obj = load(euid=euid, tenant=_tenant())
    assert obj is not None
    return subject_history(obj.uid)


def produced_by_record(euid: str) -> list[str]:
    """Parents of an object through execution_record_output (the producing records)."""
    obj = load(euid=euid, tenant=_tenant())
    assert obj is not None
    return [e["euid"] for e in lineage_of(obj.uid)
            if e["direction"] == "parent" and e["relationship_type"] == "execution_record_output"]


def _tenant() -> str:
    from django.conf import settings

    return settings.TAPDB_TENANT_ID
