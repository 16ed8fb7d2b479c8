"""The People screen in a real browser: an admin gives a bench scientist a profile of their
own, with a reason; the change is in the person's history, and the dashboard's coverage counts
the scientist as rostered before they ever sign in."""

from __future__ import annotations

import pytest

from bloomops.accounts.models import PersonProfile, ProfileChange
from tests.engine import make_queue
from tests.test_browser_ui import browser, signed_in, site  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser]


def test_admin_gives_a_scientist_a_profile_and_the_dashboard_counts_them(
        browser, site):  # noqa: F811  (the fixtures imported above)
    make_queue("seq", display_name="Sequencing", required_worker_capabilities=["wetlab.seq2"])
    page = signed_in(browser, site, "admin")
    row = page.locator('#queue-table tr[data-queue="seq"]')
    assert "nobody can serve" in row.inner_text()
    page.get_by_role("link", name="People").click()
    page.locator('#people tr[data-person="scientist"]').get_by_role(
        "link", name="scientist").click()
    page.get_by_label("Use the lab-wide default profile").uncheck()
    page.get_by_label("Capabilities").fill("wetlab.qc\nwetlab.seq2")
    page.get_by_label("Lease limit").fill("2")
    page.get_by_role("button", name="Save").click()
    # no reason: refused in plain words, nothing written
    assert "needs a reason" in page.locator("#person-form").inner_text()
    assert ProfileChange.objects.count() == 0
    page.get_by_label("Reason").fill("trained on the new sequencer")
    page.get_by_role("button", name="Save").click()
    assert "next time they act" in page.locator(".messages").inner_text()
    history = page.locator("#person-history").inner_text()
    assert "trained on the new sequencer" in history and "admin" in history
    assert PersonProfile.objects.get(user__username="scientist").capabilities == [
        "wetlab.qc", "wetlab.seq2"]
    page.get_by_role("link", name="Queues").click()
    row = page.locator('#queue-table tr[data-queue="seq"]')
    assert "0 online of 1 rostered" in row.inner_text()
    assert "nobody online" in row.inner_text()
    page.context.close()
