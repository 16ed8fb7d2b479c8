"""The scan-to-claim loop (RULES.md#claims) in a real browser, driven by the keyboard only,
as a barcode scanner drives it (it types the EUID and presses Enter). After every outcome the
field is empty and focused, the page is still /scan/, and each claim is written once."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from bloomops.execution import selectors
from tests import test_browser_ui as ui
from tests.engine import act, actor, fetch_value, make_subject

pytestmark = [pytest.mark.browser]

# The Playwright set-up and the served lab are those of the UI tests (one home).
browser = ui.browser
site = ui.site

UNKNOWN = "Z-MX-NOPE"


def leases_of(euid: str) -> int:
    """Leases of a subject in any status: a claim writes exactly one."""
    return sum(1 for x in selectors.leases() if x["subject_euid"] == euid)


def lease_statuses(euid: str) -> list[str]:
    return [x["props"]["status"] for x in selectors.leases() if x["subject_euid"] == euid]


def claimed_on_my_work(browser, site: str, name: str):
    """A subject named ``name`` scanned and claimed, then My work open: its page, its card,
    its EUID."""
    euid = make_subject("q1", name=name)
    page = scan_page(browser, site, javascript=True)
    scan(page, euid)
    outcome(page, ".claimed", euid)
    page.goto(f"{site}/my-work/")
    return page, page.locator(f'article.work-item[data-euid="{euid}"]'), euid


def claim_records() -> int:
    """Claim action records of this test's tenant."""
    return fetch_value("SELECT count(*) FROM generic_instance WHERE type = 'execution_queue'"
                       " AND subtype = 'claim_queue_item' AND tenant_id = %s",
                       [str(settings.TAPDB_TENANT_ID)])


def scan(page, euid: str) -> None:
    focused(page)
    page.keyboard.type(euid)
    page.keyboard.press("Enter")


def focused(page) -> None:
    """The scan field has the focus (a scanner types into whatever has it): wait for it, as a
    person waits for the page, rather than type into a page still loading."""
    expect(page.locator("#scan-euid")).to_be_focused(timeout=10000)


def outcome(page, css: str, text: str):
    """Wait for the outcome the scan brought back (refusal or claim) and return it."""
    result = page.locator(f"#scan-result{css}")
    result.filter(has_text=text).wait_for()
    return result


def ready_for_the_next_scan(page, site: str) -> None:
    assert page.url == f"{site}/scan/"
    assert page.locator("#scan-euid").input_value() == ""
    assert page.evaluate("document.activeElement.id") == "scan-euid"


def key(page) -> str:
    return page.locator('form[action="/scan/"] input[name=idempotency_key]').input_value()


def scan_page(browser, site: str, javascript: bool):
    """/scan/ of the signed-in scientist, in a browser with or without JavaScript."""
    page = ui.signed_in(browser, site, "scientist")
    if not javascript:
        context = browser.new_context(java_script_enabled=False)
        context.add_cookies(page.context.cookies())
        page.context.close()
        page = context.new_page()
        page.set_default_timeout(10000)
    page.goto(f"{site}/scan/")
    return page


WITH_AND_WITHOUT_JS = pytest.mark.parametrize("javascript", [True, False],
                                              ids=["htmx", "no-javascript"])


@WITH_AND_WITHOUT_JS
def test_the_scan_loop_by_keyboard_refused_then_two_claims(browser, site, javascript):
    first = make_subject("q1", name="Specimen first")
    second = make_subject("q1", name="Specimen second")
    page = scan_page(browser, site, javascript)
    page.evaluate("window.__sameDocument = true") if javascript else None
    ready_for_the_next_scan(page, site)
    keys = [key(page)]

    scan(page, UNKNOWN)
    refusal = outcome(page, ".refusal", UNKNOWN)
    said = refusal.inner_text()
    assert "Not claimed" in said and "No subject has this EUID or name." in said
    ready_for_the_next_scan(page, site)
    keys.append(key(page))

    for euid, name in ((first, "Specimen first"), (second, "Specimen second")):
        scan(page, euid)  # was read as "Z-MX-NOPE" + euid before the fix
        banner = outcome(page, ".claimed", euid)
        text = banner.inner_text()
        assert f"Claimed {name} ({euid})" in text
        assert "Queue one" in text  # the queue's display name
        assert "complete it" in text  # what to do next
        lease = next(x["euid"] for x in selectors.leases() if x["subject_euid"] == euid)
        assert banner.get_by_role("link", name="Act on it in My work").get_attribute(
            "href") == f"/my-work/?item={lease}"  # the claimed item's work view
        assert page.locator(".refusal").count() == 0
        ready_for_the_next_scan(page, site)
        keys.append(key(page))

    assert len(set(keys)) == len(keys)  # a fresh idempotency key for every scan
    if javascript:  # htmx swapped the outcomes in; the page never reloaded
        assert page.evaluate("window.__sameDocument") is True
    assert leases_of(first) == 1 and leases_of(second) == 1 and leases_of(UNKNOWN) == 0
    assert claim_records() == 2
    page.get_by_role("link", name="Act on it in My work").click()
    page.wait_for_url(re.compile(r".*/my-work/\?item=.+"))
    assert page.locator(f'#my-leases [data-euid="{second}"]').count() == 1
    page.get_by_role("link", name="All my work (1 more)").click()
    page.wait_for_url(f"{site}/my-work/")
    for euid in (first, second):
        assert page.locator(f'#my-leases [data-euid="{euid}"]').count() == 1
    page.context.close()


@WITH_AND_WITHOUT_JS
def test_a_double_enter_claims_once_and_shows_the_claim(browser, site, javascript):
    euid = make_subject("q1", name="Specimen twice")
    page = scan_page(browser, site, javascript)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    focused(page)
    page.keyboard.type(euid)
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # the scanner's (or the scientist's) second Enter
    outcome(page, ".claimed", euid)
    assert page.locator(".refusal").count() == 0
    assert page.locator("#scan-outcome").inner_text().count("Claimed") == 1
    ready_for_the_next_scan(page, site)
    assert leases_of(euid) == 1 and claim_records() == 1
    assert errors == []
    page.context.close()


def test_a_scanner_that_ends_its_scan_with_tab_claims_each_scan(browser, site):
    """A scanner set to send Tab after the barcode moved the focus to Claim and sent
    nothing; the next scan was glued to the first ("Z-MX-4J9Z-MX-49W")."""
    first, second = make_subject("q1", name="Tab tube 1"), make_subject("q1", name="Tab tube 2")
    page = ui.signed_in(browser, site, "scientist")
    page.goto(f"{site}/scan/")
    for euid in (first, second):
        focused(page)
        page.keyboard.type(euid)
        page.keyboard.press("Tab")
        outcome(page, ".claimed", euid)
    assert {x["subject_euid"] for x in selectors.leases(status="ACTIVE")} == {first, second}
    # a person typing by hand and pressing Tab moves on to Claim: nothing is sent until they
    # press it (moving the focus claimed the item)
    third = make_subject("q1", name="Tab tube 3")
    focused(page)
    page.keyboard.type(third, delay=120)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") != "scan-euid"
    page.wait_for_timeout(500)
    assert third not in {x["subject_euid"] for x in selectors.leases(status="ACTIVE")}
    page.context.close()


def test_what_is_typed_while_a_claim_runs_is_the_next_scan(browser, site):
    first = make_subject("q1", name="Specimen held back")
    second = make_subject("q1", name="Specimen typed meanwhile")
    page = ui.signed_in(browser, site, "scientist")
    page.goto(f"{site}/scan/")
    held = []
    page.route(f"{site}/scan/", lambda route: held.append(route)
               if route.request.method == "POST" and not held else route.continue_())
    with page.expect_request(lambda r: r.method == "POST"):
        scan(page, first)
    page.keyboard.type(second)  # the claim of the first has not answered yet
    assert held, "the first claim should be held back by the route"
    held[0].continue_()
    outcome(page, ".claimed", first)
    # the answer did not wipe the next scan, and the field kept the focus
    assert page.locator("#scan-euid").input_value() == second
    assert page.evaluate("document.activeElement.id") == "scan-euid"
    page.keyboard.press("Enter")
    outcome(page, ".claimed", second)
    ready_for_the_next_scan(page, site)
    assert leases_of(first) == 1 and leases_of(second) == 1
    page.context.close()


def test_a_scan_without_an_answer_says_so_and_the_next_scan_gets_a_new_key(browser, site):
    euid = make_subject("q1", name="Specimen after the outage")
    page = scan_page(browser, site, javascript=True)
    failures = ["abort", "500"]

    def flaky(route):
        if route.request.method == "POST" and failures:
            failure = failures.pop(0)
            return route.abort() if failure == "abort" else route.fulfill(status=500, body="x")
        return route.continue_()

    page.route(f"{site}/scan/", flaky)
    for said in ("did not answer", "failed to answer"):
        before = key(page)
        scan(page, euid)
        outcome(page, ".refusal", said)
        assert f"Not confirmed: {euid}" in page.locator("#scan-result").inner_text()
        ready_for_the_next_scan(page, site)
        assert key(page) != before
    assert leases_of(euid) == 0
    scan(page, euid)
    outcome(page, ".claimed", euid)
    ready_for_the_next_scan(page, site)
    assert leases_of(euid) == 1
    page.context.close()


def test_a_scan_after_the_session_ended_goes_to_sign_in_and_claims_nothing(browser, site):
    euid = make_subject("q1", name="Specimen after sign-out")
    page = scan_page(browser, site, javascript=True)
    page.context.clear_cookies(name="sessionid")
    scan(page, euid)
    page.wait_for_url(f"{site}/accounts/login/?next=/scan/")
    assert leases_of(euid) == 0
    page.context.close()


def test_scans_in_quick_succession_on_a_slow_network_are_each_claimed_once(browser, site):
    """With each claim 400 ms away, four scans sent "Z-MX-2K9", "Z-MX-2SXZ-MX-280Z-MX-2FJ":
    a scan queued behind one in flight read the field when its turn came, with the next
    one's keys in it. Each scan is its own request with exactly what was scanned, and each
    outcome stays listed after the next."""
    import time

    euids = [make_subject("q1", name=f"Specimen rush {n}") for n in range(3)]
    page = scan_page(browser, site, javascript=True)
    sent = []

    def slow(route):
        if route.request.method == "POST":
            sent.append(route.request.post_data)
            time.sleep(0.4)
        route.continue_()

    page.route(f"{site}/scan/", slow)
    focused(page)
    for euid in euids:
        page.keyboard.type(euid, delay=8)
        page.keyboard.press("Enter")
    expect(page.locator("#scan-log li")).to_have_count(3, timeout=15000)
    assert [leases_of(e) for e in euids] == [1, 1, 1]
    assert all(any(f"euid={e}&" in body or body.endswith(f"euid={e}") for body in sent)
               for e in euids), sent
    log = page.locator("#scan-log").inner_text()
    assert all(e in log for e in euids) and "Not" not in log
    page.context.close()


def test_a_second_scan_of_the_tube_in_hand_is_already_yours(browser, site):
    euid = make_subject("q1", name="Specimen in hand")
    page = scan_page(browser, site, javascript=True)
    scan(page, euid)
    outcome(page, ".claimed", euid)
    scan(page, euid)
    result = outcome(page, ".claimed", "Already yours")
    assert "Not claimed" not in result.inner_text()
    assert leases_of(euid) == 1
    page.context.close()


def test_a_scan_into_a_release_or_failure_reason_sends_neither(browser, site):
    """A scanner types into whatever has focus and presses Enter: in My work's "Why" of a
    release it released the item with the barcode as its reason, in "What went wrong" it
    recorded a failure nobody chose. Those forms are sent by their buttons only."""
    page, item, euid = claimed_on_my_work(browser, site, "Specimen at the bench")
    for summary, field in (("Release…", "input[name=reason]"),
                           ("Fail…", "input[name=error_message]")):
        item.get_by_text(summary).click()
        item.locator(field).click()
        page.keyboard.type("Z-MX-NEXT1")
        page.keyboard.press("Enter")
        page.wait_for_timeout(500)
        assert page.url == f"{site}/my-work/"
        assert lease_statuses(euid) == ["ACTIVE"]
    page.context.close()


def test_the_list_of_scans_outlives_a_reload_but_not_the_sign_in(browser, site):
    """A tablet's browser reloads a page it put away, and the list of the shift's outcomes
    was gone with it. It is kept in the tab for this sign-in; the next sign-in starts empty."""
    euid = make_subject("q1", name="Specimen before reload")
    page = scan_page(browser, site, javascript=True)
    scan(page, euid)
    outcome(page, ".claimed", euid)
    scan(page, UNKNOWN)
    outcome(page, ".refusal", UNKNOWN)
    expect(page.locator("#scan-log li")).to_have_count(2)
    page.reload()
    focused(page)
    expect(page.locator("#scan-log li")).to_have_count(2)
    assert page.locator("#scan-history").is_visible()
    assert page.locator("#scan-log li.log-refusal").inner_text().endswith(UNKNOWN)
    assert euid in page.locator("#scan-log li.log-claimed").inner_text()
    # an earlier claim is one tap from its work (the list was plain text), kept so too
    claimed = page.locator("#scan-log li.log-claimed a")
    expect(claimed).to_have_attribute("href", re.compile(r"^/my-work/\?item=Z-"))
    claimed.click()
    expect(page).to_have_url(re.compile(r"/my-work/\?item=Z-"))
    page.go_back()
    focused(page)
    # the same tab, signed in again (the session ended): the list was the last sign-in's
    page.context.clear_cookies(name="sessionid")
    page.goto(f"{site}/accounts/login/?next=/scan/")
    page.get_by_label("Username").fill("scientist")
    page.get_by_label("Password").fill(ui.PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{site}/scan/")
    focused(page)
    expect(page.locator("#scan-log li")).to_have_count(0)
    assert not page.locator("#scan-history").is_visible()
    page.context.close()


def test_recording_a_failure_says_what_becomes_of_the_item_first(browser, site):
    """One tap on "Record failure" with "Cannot be done" chosen sent the item to the dead
    letters, which only QA undoes (with a second person's approval): the bench was not asked
    first. The dialog says what the chosen kind of failure does; going back sends nothing."""
    page, item, euid = claimed_on_my_work(browser, site, "Specimen that failed")
    item.get_by_text("Fail…").click()
    item.get_by_label("What kind of failure").select_option("PERMANENT_INPUT")
    item.get_by_label("What went wrong").fill("tube cracked")
    item.get_by_role("button", name="Record failure").click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text("Specimen that failed: it will not be tried again; QA sees"
                                   " it among the dead letters.")
    page.get_by_role("button", name="Go back").click()
    expect(dialog).to_be_hidden()
    assert lease_statuses(euid) == ["ACTIVE"]
    item.get_by_label("What kind of failure").select_option("TRANSIENT_SYSTEM")
    item.get_by_role("button", name="Record failure").click()
    expect(dialog).to_contain_text("tried again after a pause")
    page.get_by_role("button", name="Yes, record failure").click()
    expect(page.locator(".messages")).to_contain_text("tried again")
    assert lease_statuses(euid) != ["ACTIVE"]
    page.context.close()


def test_a_screen_reader_hears_each_scan_in_one_sentence(browser, site):
    """The whole outcome was a live region: every scan read out the queue's key, what to do
    next, the claim's end, the links and "scan the next item". Now one sentence is said (a
    refusal at once, a claim in its turn) and the rest is there to read at will."""
    euid = make_subject("q1", name="Specimen heard")
    page = scan_page(browser, site, javascript=True)
    status, alert = page.locator("#scan-said-status"), page.locator("#scan-said-alert")
    page.evaluate("() => { document.getElementById('scan-said-alert').dataset.kept = '1'; }")
    assert status.get_attribute("aria-live") == "polite"
    assert alert.get_attribute("aria-live") == "assertive"
    page.evaluate("""() => { window.__said = [];
        new MutationObserver(() => window.__said.push(
            document.getElementById('scan-said-alert').textContent)).observe(
            document.getElementById('scan-said-alert'), {childList: true, subtree: true}); }""")
    refused = f"Not claimed: {UNKNOWN}. No subject has this EUID or name."
    for n in (1, 2):  # the same words twice are said twice: emptied, then filled again
        scan(page, UNKNOWN)
        for _ in range(50):
            if len([t for t in page.evaluate("window.__said") if t.strip()]) >= n:
                break
            page.wait_for_timeout(100)
        expect(alert).to_have_text(refused)
        expect(status).to_have_text("")
    assert [t.strip() for t in page.evaluate("window.__said") if t.strip()] == [refused] * 2
    scan(page, euid)
    outcome(page, ".claimed", euid)
    expect(status).to_have_text("Claimed Specimen heard, from Queue one.")
    expect(alert).to_have_text("")
    held = make_subject("q1", name="Specimen held back")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=held,
        expected_state="READY", payload={"hold_code": "QA_REVIEW", "reason": "label smudged"})
    scan(page, held)  # refused for a reason: the reason is said, not a sentence ending in ":"
    expect(alert).to_have_text(re.compile(
        r"^Not claimed: Specimen held back\. It is not available to claim right now: .*"
        r"label smudged.*\.$"))
    scan(page, euid)  # the tube in hand scanned again: good news, said politely
    outcome(page, ".claimed", "Already yours")
    expect(status).to_have_text("Already yours: Specimen heard.")
    # nothing else on the page is live: the outcome's details are not read out on each scan
    assert page.evaluate("""() => [...document.querySelectorAll(
        '[aria-live], [role=status], [role=alert]')].map(e => e.id)
        .filter(id => id.startsWith('scan'))""") == ["scan-said-status", "scan-said-alert"]
    # the regions are the page's own, never swapped for new ones (a region put in place with
    # its words already in it is not read out)
    assert page.evaluate("() => document.getElementById('scan-said-alert').dataset.kept") == "1"
    page.route(f"{site}/scan/", lambda route: route.abort())
    scan(page, euid)
    outcome(page, ".refusal", "did not answer")
    expect(alert).to_have_text(re.compile(rf"^Not confirmed: {euid}\. The server did not"))
    page.context.close()
