"""Every answer is fetched anew (docs/DEPLOY.md, Browser policy): a browser's Back or a
proxy never shows a page or an API answer from before a change; static files keep their
cache."""

from __future__ import annotations

import pytest

from tests.api_helpers import api_for
from tests.engine import make_queue
from tests.web_support import signed_in


@pytest.mark.parametrize("page", ["/", "/workers/", "/workbench/", "/settings/queues/",
                                  "/approvals/", "/activity/"])
def test_no_console_page_is_kept_by_the_browser(client, lab, page):
    client = signed_in(client, lab["admin"])
    answer = client.get(page)
    assert answer.status_code == 200, page
    assert "no-store" in answer["Cache-Control"], page


def test_a_queue_s_settings_after_a_change_are_not_the_cached_ones(client, lab):
    """Back after saving a queue's settings showed the old revision from the browser's cache."""
    make_queue("nostore-q")
    client = signed_in(client, lab["admin"])
    assert "no-store" in client.get("/settings/queues/nostore-q/")["Cache-Control"]


def test_api_answers_and_refusals_are_not_kept(lab, users):
    api = api_for(users["operator"])
    for answer in (api.get("/queues"), api.get("/nowhere")):
        assert "no-store" in answer["Cache-Control"], answer.status_code


def test_the_sign_in_page_is_not_kept(client, lab):
    assert "no-store" in client.get("/accounts/login/")["Cache-Control"]


def test_static_files_keep_their_cache(client, lab):
    answer = client.get("/static/js/operator.js")
    assert answer.status_code == 200
    assert "no-store" not in answer.get("Cache-Control", "")
