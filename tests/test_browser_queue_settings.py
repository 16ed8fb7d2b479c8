"""The queue settings page in a real browser: an admin edits a setting, sees the diff before
anything is saved, saves with a reason, and finds the change in the history; disabling shows
on the dashboard with its reason (docs/RULES.md#queue-configuration)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bloomops.execution import selectors
from tests.engine import act, actor
from tests.test_browser_ui import browser, signed_in, site  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]


def test_admin_previews_the_diff_then_saves(browser, site):  # noqa: F811
    act("create_queue", actor("admin", username="admin"), queue_key="line",
        payload={"subject_template_codes": ["content/material/specimen/1.0"],
                 "display_name": "Line", "reason": "first"})
    page = signed_in(browser, site, "admin")
    page.locator("#queue-settings-link").click()
    page.get_by_role("link", name="Line").click()
    page.wait_for_url(f"{site}/settings/queues/line/")
    page.get_by_label("Lease TTL seconds").fill("1800")
    page.get_by_label("Strict order").check()
    page.locator("#preview-button").click()
    diff = page.locator("#diff")
    # the field in words and by key, its seconds in words too (a typo of x10 shows)
    assert [c.inner_text() for c in diff.locator(
        'tr[data-field="lease_ttl_seconds"] td').all()] == [
        "Lease TTL seconds lease_ttl_seconds", "900 (15 min)", "1800 (30 min)"]
    assert diff.locator('tr[data-field="strict_order"]').count() == 1
    assert diff.locator("tbody tr").count() == 2
    # Nothing is saved by the preview.
    assert selectors.queue_config("line")["config"]["lease_ttl_seconds"] == 900
    page.locator("#save-reason").fill("instrument runs in order now")
    page.locator("#save").click()
    assert "Saved" in page.locator(".messages").inner_text()
    cfg = selectors.queue_config("line")["config"]
    assert cfg["lease_ttl_seconds"] == 1800 and cfg["strict_order"] is True
    assert cfg["revision"] == 2
    history = page.locator("#history tbody tr").first.inner_text()
    assert "update_queue" in history and "instrument runs in order now" in history
    page.locator("#enabled-reason").fill("service visit")
    page.locator("#toggle-enabled").click()
    # disabling stops every claim from the queue: asked first
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text("Nobody can claim from line until it is enabled again")
    page.get_by_role("button", name="Yes, disable the queue").click()
    expect(page.locator(".messages")).to_contain_text("Queue disabled.")
    page.goto(f"{site}/")
    row = page.locator('#queue-table tr[data-queue="line"]')
    assert "disabled" in row.inner_text() and "service visit" in row.inner_text()
