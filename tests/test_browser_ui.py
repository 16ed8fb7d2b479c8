"""The operator UI in a real browser (Playwright driving Debian's Chromium,
headless) against pytest-django's live server on committed data."""

from __future__ import annotations

import os
import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from bloomops.accounts.roles import ALL_ROLES
from bloomops.execution import selectors
from tests.engine import envelope, make_subject
from tests.test_failures_view import held_and_dead
from tests.web_support import flow

# Playwright's sync API runs an event loop in this thread; Django's ORM calls made by the
# test itself (fixtures, assertions) are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
PASSWORD = "pw-browser-test"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def site(committed, tenant, settings, live_server):
    """Committed users of each role and the two-queue flow, served by the live server."""
    settings.BLOOMOPS_DASHBOARD_REFRESH_SECONDS = 1
    for name in ALL_ROLES:  # a flush by an earlier transactional test drops the groups
        Group.objects.get_or_create(name=name)
    for username, role in (("scientist", "worker_human"), ("qa", "operator"),
                           ("supervisor", "operator"), ("admin", "admin")):
        user = User.objects.create_user(username, password=PASSWORD)
        user.groups.add(Group.objects.get(name=role))
    flow()
    return live_server.url


def signed_in(browser, url: str, username: str, width: int = 1280,
              timezone_id: str | None = None):
    context = browser.new_context(viewport={"width": width, "height": 900},
                                  **({"timezone_id": timezone_id} if timezone_id else {}))
    page = context.new_page()
    page.set_default_timeout(10000)
    page.goto(f"{url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    # the dashboard, or My work for a person at the bench
    page.wait_for_url(re.compile(re.escape(url) + r"/(my-work/)?$"))
    return page


def messages_text(page) -> str:
    return page.locator(".messages").inner_text()


def test_scientist_scans_claims_completes_and_the_item_moves_on(browser, site):
    euid = make_subject("q1", name="Specimen scan me")
    page = signed_in(browser, site, "scientist", width=1024)
    page.get_by_role("link", name="Scan", exact=True).first.click()  # the navigation's
    page.wait_for_url(f"{site}/scan/")
    # the scan field has the focus: a barcode scanner just types and presses Enter
    expect(page.locator("#scan-euid")).to_be_focused(timeout=10000)
    page.keyboard.type(euid)
    page.keyboard.press("Enter")
    page.locator("#scan-result.claimed").get_by_role("link", name="Act on it in My work").click()
    page.wait_for_url(re.compile(r".*/my-work/\?item=.+"))
    row = page.locator(f'#my-leases [data-euid="{euid}"]')
    assert row.get_by_label("Next queue").input_value() == "q2"
    row.get_by_role("button", name="Complete").click()
    page.wait_for_url(f"{site}/my-work/")
    assert f"({euid}); it moved to Queue two (q2)." in messages_text(page)
    page.goto(f"{site}/queues/q2/")
    assert page.locator(f'#items tr[data-euid="{euid}"]').count() == 1
    page.goto(f"{site}/queues/q1/")
    assert page.locator(f'#items tr[data-euid="{euid}"]').count() == 0
    assert envelope(euid)["next_queue_key"] == "q2"
    page.context.close()


def test_qa_holds_an_item_it_leaves_the_queue_then_releases_it(browser, site):
    euid = make_subject("q1", name="Specimen for QA")
    page = signed_in(browser, site, "qa")
    page.goto(f"{site}/queues/q1/")
    page.locator(f'#items tr[data-euid="{euid}"] a').click()
    page.wait_for_url(f"{site}/subjects/{euid}/")
    page.get_by_label("Hold reason").fill("Possible contamination")
    page.get_by_role("button", name="Place hold").click()
    assert f"{euid} is on hold." in messages_text(page)
    assert "Possible contamination" in page.locator("#reasons").inner_text()
    page.goto(f"{site}/queues/q1/")
    assert page.locator(f'#items tr[data-euid="{euid}"]').count() == 0
    page.goto(f"{site}/subjects/{euid}/")
    page.get_by_label("Release reason").fill("Cleared")
    page.get_by_role("button", name="Release hold").click()
    page.get_by_role("button", name="Yes, release hold").click()  # the confirmation
    expect(page.locator(".messages")).to_contain_text(f"Hold on {euid} released.")
    page.goto(f"{site}/queues/q1/")
    assert page.locator(f'#items tr[data-euid="{euid}"]').count() == 1
    page.context.close()


def test_admin_force_expires_a_lease_and_the_item_reappears(browser, site):
    euid = make_subject("q1", name="Specimen stuck")
    sci = signed_in(browser, site, "scientist")
    sci.goto(f"{site}/queues/q1/")
    sci.get_by_role("button", name="Claim next").click()
    sci.wait_for_url(re.compile(r".*/my-work/\?item=.+"))  # the claimed item's work view
    sci.goto(f"{site}/queues/q1/")
    assert sci.locator(f'#items tr[data-euid="{euid}"]').count() == 0
    admin = signed_in(browser, site, "admin")
    admin.get_by_role("link", name="Admin").click()
    lease = selectors.leases(status="ACTIVE")[0]["euid"]
    row = admin.locator(f'#active-leases tr[data-lease="{lease}"]')
    row.get_by_label("Reason").fill("bench closed")
    row.get_by_role("button", name=f"Force-expire lease {lease}").click()
    admin.get_by_role("button", name="Yes, force-expire").click()  # the confirmation
    expect(admin.locator(".messages")).to_contain_text("its subject is back in its queue")
    admin.goto(f"{site}/queues/q1/")
    assert admin.locator(f'#items tr[data-euid="{euid}"]').count() == 1
    sci.context.close()
    admin.context.close()


def test_a_human_worker_forging_an_operator_post_gets_403(browser, site):
    euid = make_subject("q1", name="Specimen target")
    page = signed_in(browser, site, "scientist")
    page.goto(f"{site}/subjects/{euid}/")
    assert page.get_by_role("button", name="Place hold").count() == 0  # not shown
    status = page.evaluate(
        """async (euid) => {
            const token = document.querySelector('input[name=csrfmiddlewaretoken]').value;
            const body = new URLSearchParams({csrfmiddlewaretoken: token,
                idempotency_key: 'forged-1', expected_state: 'READY', reason: 'forged'});
            const r = await fetch(`/subjects/${euid}/hold/`, {method: 'POST', body});
            return r.status;
        }""",
        euid,
    )
    assert status == 403
    assert envelope(euid)["state"] == "READY"
    page.context.close()


def test_the_dashboard_updates_itself_when_another_session_claims(browser, site):
    make_subject("q1", name="Specimen A")
    make_subject("q1", name="Specimen B")
    board = signed_in(browser, site, "supervisor")
    depth = board.locator('#queue-table tr[data-queue="q1"] td.depth')
    assert depth.inner_text() == "2"
    board.evaluate("window.__sameDocument = true")
    sci = signed_in(browser, site, "scientist")
    sci.goto(f"{site}/queues/q1/")
    sci.get_by_role("button", name="Claim next").click()
    sci.wait_for_url(re.compile(r".*/my-work/\?item=.+"))  # the claimed item's work view
    sci.goto(f"{site}/queues/q1/")
    # no reload: htmx swaps the panel in place
    board.wait_for_function(
        "() => document.querySelector('#queue-table tr[data-queue=\"q1\"] td.depth')"
        ".textContent.trim() === '1'", timeout=10000)
    assert board.evaluate("window.__sameDocument") is True
    assert board.locator('#queue-table tr[data-queue="q1"] td.leased').inner_text() == "1"
    # paused, it stays as it is; resumed, it catches up
    pause = board.get_by_role("button", name="Pause auto-refresh")
    pause.click()
    assert pause.get_attribute("aria-pressed") == "true"
    expect(board.locator("#refresh-note")).to_have_text("Auto-refresh paused.")
    sci.goto(f"{site}/queues/q1/")
    sci.get_by_role("button", name="Claim next").click()
    sci.wait_for_url(re.compile(r".*/my-work/\?item=.+"))  # the claimed item's work view
    sci.goto(f"{site}/queues/q1/")
    board.wait_for_timeout(2500)
    assert depth.inner_text() == "1"
    pause.click()
    assert pause.get_attribute("aria-pressed") == "false"
    expect(board.locator("#refresh-note")).to_have_text(re.compile(r"^Refreshes every \d+ s\.$"))
    board.wait_for_function(
        "() => document.querySelector('#queue-table tr[data-queue=\"q1\"] td.depth')"
        ".textContent.trim() === '0'", timeout=10000)
    sci.context.close()
    board.context.close()


def test_a_focused_count_keeps_the_focus_when_it_changes(browser, site):
    """A keyboard user on a queue's depth link stays there when the refresh changes the
    number (the link's words change, its place and destination do not)."""
    make_subject("q1", name="Specimen A")
    make_subject("q1", name="Specimen B")
    board = signed_in(browser, site, "supervisor")
    depth_link = board.locator('#queue-table tr[data-queue="q1"] td.depth a')
    depth_link.focus()
    sci = signed_in(browser, site, "scientist")
    sci.goto(f"{site}/queues/q1/")
    sci.get_by_role("button", name="Claim next").click()
    sci.wait_for_url(re.compile(r".*/my-work/\?item=.+"))
    board.wait_for_function(
        "() => document.querySelector('#queue-table tr[data-queue=\"q1\"] td.depth')"
        ".textContent.trim() === '1'", timeout=10000)
    board.wait_for_timeout(300)  # the swap settled
    assert board.evaluate("""() => document.activeElement ===
        document.querySelector('#queue-table tr[data-queue="q1"] td.depth a')""")
    sci.context.close()
    board.context.close()


def test_the_focus_stays_on_its_own_link_of_two_alike(browser, site):
    """Held and Dead letter of a queue lead to the same page, and with one of each they say
    the same number: a keyboard user on Dead letter stays there through a refresh."""
    held_and_dead("q1", "q1")
    board = signed_in(browser, site, "supervisor")
    row = '#queue-table tr[data-queue="q1"]'
    assert board.locator(f"{row} td.held a").inner_text() == "1"
    board.locator(f"{row} td.dead a").focus()
    make_subject("q1", name="Specimen new")  # the next refresh has something to change
    board.wait_for_function(
        f"() => document.querySelector('{row} td.depth').textContent.trim() === '1'",
        timeout=10000)
    board.wait_for_timeout(300)  # the swap settled
    assert board.evaluate(f"() => document.activeElement ==="
                          f" document.querySelector('{row} td.dead a')")
    board.context.close()


@pytest.mark.parametrize("width", [1024, 1280])
def test_screens_fit_bench_tablet_and_desktop_widths(browser, site, width):
    euid = make_subject("q1", name="<script>alert(1)</script>")
    page = signed_in(browser, site, "admin", width=width)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path in ("/", "/queues/q1/", "/scan/", "/my-work/", f"/subjects/{euid}/",
                 "/workers/", "/workbench/", "/admin/"):
        page.goto(f"{site}{path}")
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, (path, width, overflow)
    page.goto(f"{site}/queues/q1/")
    assert "<script>alert(1)</script>" in page.locator("#items").inner_text()  # shown as text
    assert dialogs == []  # and never run
    # every form control on the queue page has a label (or an aria-label)
    unlabelled = page.evaluate("""() => [...document.querySelectorAll(
        'input:not([type=hidden]), select, textarea')].filter(el =>
        !(el.labels && el.labels.length) && !el.getAttribute('aria-label')).map(el => el.name)""")
    assert unlabelled == []
    page.context.close()


def test_keyboard_only_claim_from_the_queue_page(browser, site):
    euid = make_subject("q1", name="Specimen keyboard")
    page = signed_in(browser, site, "scientist")
    page.goto(f"{site}/queues/q1/")
    page.get_by_role("button", name="Claim next").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/my-work/\?item=.+"))
    assert f"({euid}) from Queue one (q1)." in messages_text(page)
    page.goto(f"{site}/queues/q1/")
    assert re.search(r"0 visible items", page.locator("#item-count").inner_text())
    page.context.close()


def test_holds_placed_today_are_counted_in_the_readers_own_zone(browser, site):
    """The hold search's "today" is the reader's day: the browser names its zone."""
    page = signed_in(browser, site, "qa", timezone_id="Asia/Tokyo")
    page.goto(f"{site}/holds/")
    page.get_by_label("Placed", exact=True).select_option("today")
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#hold-count")).to_contain_text("(Asia/Tokyo)")
    page.context.close()


def test_activity_reads_the_reader_s_days_on_the_first_visit(browser, site):
    """The browser says its zone on every page, so Activity's first visit (before its form
    sends "tz") reads whole days where the reader is, not in UTC."""
    page = signed_in(browser, site, "qa", timezone_id="Pacific/Honolulu")
    page.goto(f"{site}/activity/")
    expect(page.locator("#activity-count")).to_contain_text("whole days in Pacific/Honolulu")
    page.context.close()
