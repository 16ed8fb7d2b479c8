"""The failures view in a real browser: a supervisor narrows to one error class, selects
everything, sees the count and the consequence, gives a reason, and the items retry."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.engine import SERVICE, actor, envelope, register
from tests.test_browser_ui import browser, signed_in, site  # noqa: F401  (fixtures)
from tests.test_failures_view import CAPS, fail

pytestmark = [pytest.mark.browser]


def test_supervisor_retries_one_error_class_after_confirming_the_count(browser, site):  # noqa: F811
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=CAPS, max_concurrent_leases=10)
    flaky = [fail(svc, worker, f"Tube {n}", error_class="TRANSIENT_DEPENDENCY",
                  error_message="scanner offline") for n in "AB"]
    broken = fail(svc, worker, "Tube C", error_class="PERMANENT_INPUT",
                  error_message="tube cracked")
    page = signed_in(browser, site, "supervisor")
    page.get_by_role("link", name="Failures").click()
    groups = page.locator("#failure-groups")
    expect(groups).to_contain_text("scanner offline")
    groups.get_by_role("link", name="Waiting on something else").click()
    expect(page.get_by_role("heading", name="Items matching the filter (2)")).to_be_visible()
    page.get_by_label("Select all").check()
    expect(page.locator("input.pick:checked")).to_have_count(2)
    page.get_by_label("Action").select_option("requeue")
    page.get_by_role("button", name="Selected items…").click()
    expect(page.get_by_role("heading", name="Requeue 2 items?")).to_be_visible()
    expect(page.locator("#consequence")).to_contain_text("can be claimed again")
    # Going back changes nothing.
    assert all(envelope(e)["state"] == "FAILED_RETRYABLE" for e in flaky)
    page.get_by_label("Reason (kept in each item's history)").fill("scanner replaced")
    page.get_by_role("button", name="Requeue 2").click()
    expect(page.locator(".messages")).to_contain_text("Requeued 2:")
    assert [envelope(e)["state"] for e in flaky] == ["READY", "READY"]
    assert envelope(broken)["state"] == "FAILED_TERMINAL"
    page.context.close()
