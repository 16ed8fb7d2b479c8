"""The warning before an idle sign-out, in a real browser (WCAG 2.2.1): nothing warned, and
a scientist's typed results went with the session."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests import test_browser_ui as ui

pytestmark = [pytest.mark.browser]
# The Playwright set-up and the served lab are those of the UI tests (one home).
browser = ui.browser
site = ui.site
IDLE = 8  # seconds: the warning comes 2 s before


@pytest.fixture
def short_sessions(settings):
    settings.SESSION_IDLE_SECONDS = settings.SESSION_COOKIE_AGE = IDLE


def test_the_page_warns_before_an_idle_sign_out_and_staying_keeps_the_session(
        browser, site, short_sessions):
    page = ui.signed_in(browser, site, "scientist")
    page.goto(f"{site}/scan/")
    warning = page.locator("#idle-warning")
    expect(warning).to_be_visible(timeout=IDLE * 1000)
    expect(warning).to_contain_text("You will be signed out in")
    stay = page.get_by_role("button", name="Stay signed in")
    expect(stay).to_be_focused()
    # before the sign-out there is nothing to sign in again to (it showed beside Stay)
    expect(page.get_by_role("link", name="Sign in again")).to_be_hidden()
    stay.click()
    expect(warning).to_be_hidden()
    page.wait_for_timeout((IDLE - 3) * 1000)  # past the first deadline, not the new one
    page.reload()
    assert page.url.endswith("/scan/")
    # typing into a form near the end is a person at work: it keeps the session unasked
    page.wait_for_timeout((IDLE - 1.5) * 1000)
    page.get_by_label(re.compile("Scan or type")).type("Z-MX-1", delay=50)
    expect(warning).to_be_hidden()
    # left alone, the page says it is over and keeps what was typed; signing in says why
    expect(warning).to_contain_text("You were signed out after 8 s without activity",
                                    timeout=(IDLE + 3) * 1000)
    assert page.get_by_label(re.compile("Scan or type")).input_value() == "Z-MX-1"
    # ... and offers signing in, not a framed "Stay signed in" that did nothing any more
    expect(stay).to_be_hidden()
    page.get_by_role("link", name="Sign in again").click()
    expect(page.locator(".messages")).to_contain_text("You were signed out after")
    page.context.close()


def test_another_tab_in_use_keeps_this_tab_from_warning(browser, site, short_sessions):
    """The session is the browser's: a page left open in one tab warned, then said "signed
    out", while the person worked on in another tab (and the server kept the session)."""
    page = ui.signed_in(browser, site, "scientist")
    page.goto(f"{site}/scan/")
    other = page.context.new_page()
    other.goto(f"{site}/my-work/")
    warning = page.locator("#idle-warning")
    for _ in range(3):  # well past the first tab's own deadline, working in the other tab
        page.wait_for_timeout((IDLE - 4) * 1000)
        other.reload()
        assert warning.is_hidden()
    # left alone in both, the first tab warns in its turn
    expect(warning).to_be_visible(timeout=IDLE * 1000)
    page.context.close()
