"""Helpers of the operator-UI tests: a two-queue flow, sign-in, and reading the forms a page
rendered (so tests post exactly what a browser would, idempotency key included)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from tests.engine import make_queue

EXTRACTION = ["wetlab.extraction"]
QC = ["wetlab.qc"]


def flow() -> None:
    """q1 -> q2 -> end, both served by the capabilities every human worker has."""
    make_queue("q1", display_name="Queue one", required_worker_capabilities=EXTRACTION,
               default_next_queue_key="q2", dispatch_priority=90,
               straggler_threshold_seconds=3600)
    make_queue("q2", display_name="Queue two", required_worker_capabilities=QC,
               dispatch_priority=50)


@pytest.fixture
def lab(tenant, users):
    """The two-queue flow in a tenant of the test's own, and a user of each role."""
    flow()
    return users


def signed_in(client, user):
    client.force_login(user)
    return client


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self._current: dict | None = None
        self._select: tuple | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self._current = {"action": a.get("action", ""), "fields": {}, "id": a.get("id")}
            self.forms.append(self._current)
        elif tag == "option" and self._select is not None:
            form, name, chosen = self._select
            value = a.get("value", "")
            if not chosen and ("selected" in a or name not in form["fields"]):
                form["fields"][name] = value
                self._select = (form, name, "selected" in a)
        elif tag in ("input", "select", "textarea") and a.get("name"):
            form = self._current
            if a.get("form"):
                form = next((f for f in self.forms if f["id"] == a["form"]), form)
            if form is not None and tag == "select":
                self._select = (form, a["name"], False)
            elif form is not None and a.get("type") not in ("checkbox",):
                form["fields"].setdefault(a["name"], a.get("value", ""))

    def handle_endtag(self, tag):
        if tag == "form":
            self._current = None
        elif tag == "select":
            self._select = None


def forms(html: str) -> list[dict]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


def form_for(response, action: str, **overrides) -> dict:
    """The fields of the (first) form on the page that posts to ``action``."""
    html = response.content.decode()
    for form in forms(html):
        if form["action"] == action:
            return {**form["fields"], **overrides}
    raise AssertionError(f"no form posting to {action} on the page")


def has_form(response, action: str) -> bool:
    return any(f["action"] == action for f in forms(response.content.decode()))


