"""The bench flow in a real browser: Claim next lands on the claimed item's work view, its
claim counts down and warns before it runs out, and when an admin force-expires it the
person is told who did it and why instead of the item silently vanishing; Next queue offers
only what the flow allows; the dashboard's auto-refresh never moves focus or scroll."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts
from tests import test_browser_ui as ui
from tests.engine import act, actor, envelope, make_queue, make_subject

pytestmark = [pytest.mark.browser]

browser = ui.browser
site = ui.site
WORK_VIEW = re.compile(r".*/my-work/\?item=.+")


def test_claim_next_countdown_warning_and_the_force_expiry_notice(browser, site):
    euid = make_subject("q1", name="Specimen on the bench", priority=210,
                        next_action_key="wetlab.extract_dna")
    page = ui.signed_in(browser, site, "scientist", width=768)
    page.goto(f"{site}/queues/q1/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    expect(page.get_by_role("heading", level=1)).to_have_text("Work on Specimen on the bench")
    item = page.locator(f'#my-leases [data-euid="{euid}"]')
    expect(item.locator(".step")).to_have_text("Wetlab: extract dna")
    expect(item.locator(".prio-number")).to_have_text("210")

    # Time passes at the bench: 175 s left of a 15 min claim, the countdown runs and warns a
    # fifth of the claim ahead, 3 min (two minutes of a half-hour claim went unseen).
    lease = selectors.leases(status="ACTIVE")[0]
    assert lease["props"]["ttl_seconds"] == 900
    left = (parse_ts(lease["props"]["expires_at"]) - clock.now()).total_seconds()
    clock.advance(left - 175)
    page.reload()
    countdown = item.locator(".countdown")
    shown = countdown.inner_text()
    expect(countdown).not_to_have_text(shown)  # it ticks without a reload
    warning = item.locator(".expiry-warning")
    assert warning.get_attribute("aria-live") == "polite"
    expect(warning).to_have_text(re.compile("Less than 3 min left: renew now"), timeout=20000)
    expect(item).to_have_class(re.compile("expiring"))

    # Renew in one tap: the warning goes, the time is back.
    item.get_by_role("button", name="Renew").click()
    page.wait_for_url(WORK_VIEW)
    expect(page.locator(".messages")).to_contain_text(f"({euid}) is yours for another")
    # back at its card, its heading focused (the page had come back at its top)
    expect(item.get_by_role("heading")).to_be_focused()
    # its "until" said by the browser in the reader's zone, bare (no brackets in a sentence)
    until = page.locator(".messages time[data-humane]")
    # the day too when that is not today where the reader is (a renewal just before midnight)
    today, this_year = page.evaluate(
        "at => [new Date(at).toDateString() === new Date().toDateString(),"
        " new Date(at).getFullYear() === new Date().getFullYear()]",
        until.get_attribute("datetime"))
    day = "" if today else r"\d\d? \w{3}" + ("" if this_year else r" \d{4}") + ", "
    expect(until).to_have_text(re.compile(rf"^{day}\d\d:\d\d \S+$"))
    expect(item.locator(".expiry-warning")).to_have_text("")

    # An admin force-expires it: the person's next tap says what happened, by whom, why.
    act("expire_queue_lease", actor("admin", username="admin"), lease_euid=lease["euid"],
        payload={"reason": "bench closed for cleaning"})
    item.get_by_role("button", name="Renew").click()
    page.wait_for_url(WORK_VIEW)
    expect(page.get_by_role("heading", name="This item is no longer yours")).to_be_visible()
    notice = page.locator(f'#lost-leases li[data-lease="{lease["euid"]}"]')
    expect(notice).to_contain_text("Specimen on the bench")
    expect(notice).to_contain_text("admin ended your claim; the item went back to its queue")
    expect(notice).to_contain_text("“bench closed for cleaning”")
    assert not re.search(r"\d{4}-\d\d-\d\dT", notice.inner_text())  # humane, not ISO
    assert page.locator("#my-leases").count() == 0
    page.context.close()


def test_next_queue_offers_only_the_flow_and_completes_there(browser, site):
    make_queue("ont", display_name="ONT library prep")
    make_queue("split", display_name="Split", default_next_queue_key="q2",
               next_queue_keys=["q1"])
    euid = make_subject("split", name="Specimen to route")
    page = ui.signed_in(browser, site, "scientist", width=768)
    page.goto(f"{site}/queues/split/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    choice = page.locator(f'#my-leases [data-euid="{euid}"]').get_by_label("Next queue")
    labels = choice.locator("option").all_inner_texts()
    assert labels == ["Queue two (q2)", "Queue one (q1)"]  # no ONT, no finishing early
    assert choice.input_value() == "q2"
    complete = page.get_by_role("button", name="Complete")
    expect(complete).to_have_text("Complete → Queue two (q2)")
    choice.select_option("q1")
    expect(complete).to_have_text("Complete → Queue one (q1)")  # where it goes, before the tap
    complete.click()
    page.wait_for_url(f"{site}/my-work/")
    expect(page.locator(".messages")).to_contain_text(f"({euid}); it moved to Queue one (q1).")
    page.context.close()


def test_auto_refresh_keeps_focus_and_scroll(browser, site):
    for i in range(3):
        make_subject("q1", name=f"Specimen {i}")
    for i in range(8):  # a dashboard taller than the screen
        make_queue(f"extra{i}", display_name=f"Extra {i}")
    context = browser.new_context(viewport={"width": 768, "height": 360})
    page = context.new_page()
    page.set_default_timeout(10000)
    page.goto(f"{site}/accounts/login/")
    page.get_by_label("Username").fill("supervisor")
    page.get_by_label("Password").fill(ui.PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{site}/")
    page.evaluate("""() => { window.__swaps = 0;
        document.addEventListener('htmx:afterSettle', () => { window.__swaps += 1; }); }""")
    link = page.locator('#queue-table tr[data-queue="q2"] a').first
    link.focus()
    page.mouse.wheel(0, 200)
    page.wait_for_function("() => window.scrollY > 0")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    scrolled = page.evaluate("window.scrollY")  # the wheel's scroll done
    page.wait_for_function("() => window.__swaps >= 2")  # refreshed (every second here)
    # the refreshed part laid out and painted (two frames): where the reader is now is
    # where they stay
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate("document.activeElement.textContent") == "Queue two"
    assert page.evaluate("document.activeElement.closest('tr').dataset.queue") == "q2"
    assert page.evaluate("window.scrollY") == scrolled
    context.close()


def _claimed_at_the_bench(browser, site: str, name: str):
    """A scientist on a tablet who claimed ``name`` with Claim next: the page (its work
    view), the subject's EUID and its card."""
    euid = make_subject("q1", name=name)
    page = ui.signed_in(browser, site, "scientist", width=768)
    page.goto(f"{site}/queues/q1/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    return page, euid, page.locator(f'#my-leases [data-euid="{euid}"]')


def test_a_claim_ended_by_someone_else_stops_offering_its_buttons(browser, site, settings):
    """QA put an item on hold while the scientist's card kept counting down with working
    buttons; the next tap came back "not recorded". My work asks every few seconds which
    claims still hold, and a card whose claim ended says so and offers nothing."""
    settings.BLOOMOPS_MY_WORK_REFRESH_SECONDS = 1
    page, euid, item = _claimed_at_the_bench(browser, site, "Specimen put on hold")
    expect(item.get_by_role("button", name="Renew")).to_be_enabled()
    item.locator("summary", has_text="Fail…").click()
    typed = item.get_by_label("What went wrong")
    typed.fill("pipette jammed, half typed")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
        expected_state="READY", payload={"reason": "label check"})
    expect(item.locator(".expiry-warning")).to_contain_text("no longer yours", timeout=10000)
    expect(item.get_by_role("button", name="Renew")).to_be_disabled()
    # what was typed stays, readable and copyable (a disabled field's words are not), and the
    # focus goes to what says why rather than to the page's start
    expect(typed).to_have_js_property("readOnly", True)
    expect(typed).to_be_enabled()
    expect(typed).to_have_value("pipette jammed, half typed")
    # ... and says it in the card, without a reload: who ended it and their reason
    expect(item.locator(".why-ended")).to_have_text(
        "qa put the item on hold. Reason given: \u201clabel check\u201d. ")
    expect(item.get_by_role("link", name="Reload My work")).to_be_focused()
    expect(item.locator(".countdown")).to_have_text("ended")
    # the navigation no longer counts it
    expect(page.locator("#nav-my-work .badge")).to_have_count(0)
    page.context.close()


def test_a_claim_renewed_elsewhere_counts_down_again_and_others_are_said(browser, site,
                                                                         settings):
    """A claim renewed on another device read "ran out" on the tablet (the countdown the
    page was sent with) while it held; claims made elsewhere never appeared until reload."""
    settings.BLOOMOPS_MY_WORK_REFRESH_SECONDS = 1
    page, euid, item = _claimed_at_the_bench(browser, site, "Specimen renewed elsewhere")
    page.goto(f"{site}/my-work/")
    item = page.locator(f'#my-leases [data-euid="{euid}"]')
    # the page's own countdown runs out (as an open page's does after its claim's length),
    # its polls not answered meanwhile
    page.route("**/my-work/?part=held", lambda route: route.abort())
    item.locator(".countdown").evaluate("c => { c.dataset.secondsLeft = '0'; }")
    expect(item.locator(".countdown")).to_have_text("ran out")
    expect(item.locator(".expiry-warning")).to_contain_text("Your claim has run out")
    # the poll says how long the claim has left: the card counts down from it again
    page.unroute("**/my-work/?part=held")
    expect(item.locator(".countdown")).to_contain_text("min", timeout=10000)
    expect(item.locator(".expiry-warning")).to_have_text("")
    expect(item.get_by_role("button", name="Renew")).to_be_enabled()
    # one claimed elsewhere (the same person on another device) is said, with the way to it
    other = make_subject("q1", name="Claimed on the phone")
    act("claim_queue_item", actor("worker_human", username="scientist"), subject_euid=other,
        worker_euid=selectors.leases(status="ACTIVE")[0]["worker_euid"])
    expect(page.locator("#more-claims")).to_contain_text("You hold 1 claim more than this"
                                                         " page shows", timeout=10000)
    page.context.close()


def test_a_form_sent_offline_is_not_sent_and_the_card_says_so(browser, site):
    """A tablet whose Wi-Fi dropped showed the browser's "site can't be reached" after
    Renew, and nothing said whether it was done."""
    page, _, item = _claimed_at_the_bench(browser, site, "Specimen offline")
    page.context.set_offline(True)
    item.get_by_role("button", name="Renew").click()
    expect(item.locator(".expiry-warning")).to_contain_text("No network: nothing was sent")
    assert page.url.startswith(f"{site}/my-work/")
    page.context.set_offline(False)
    item.get_by_role("button", name="Renew").click()
    page.wait_for_url(WORK_VIEW)
    expect(page.locator(".messages")).to_contain_text("is yours for another")
    page.context.close()


def test_finishing_where_the_flow_goes_on_asks_first(browser, site):
    """'Complete and finish' sent an item past its next step in one tap; where the flow
    ends, finishing is the plain completion and asks nothing. A name that reads like one of
    the question's placeholders is a name ("{count}" had sent the form unasked)."""
    make_queue("pick", display_name="Pick", next_queue_keys=["q1", "q2"])
    euid = make_subject("pick", name="Tube {count} to finish")
    last = make_subject("q2", name="Tube at the end")  # q2's flow ends there
    page = ui.signed_in(browser, site, "scientist", width=768)
    page.goto(f"{site}/queues/pick/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    card = page.locator(f'#my-leases [data-euid="{euid}"]')
    card.get_by_label("Next queue").select_option("")
    card.get_by_role("button", name="Complete").click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text(f"Tube {{count}} to finish ({euid}) is finished here and"
                                   " goes to no next queue")
    page.get_by_role("button", name="Go back").click()
    assert selectors.leases(status="ACTIVE")[0]["subject_euid"] == euid
    card.get_by_role("button", name="Complete").click()
    page.get_by_role("button", name="Yes, complete and finish").click()
    page.wait_for_url(f"{site}/my-work/")
    expect(page.locator(".messages")).to_contain_text(euid)
    assert selectors.leases(status="ACTIVE") == []

    page.goto(f"{site}/queues/q2/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    page.locator(f'#my-leases [data-euid="{last}"]').get_by_role(
        "button", name="Complete").click()
    page.wait_for_url(f"{site}/my-work/")  # sent without a question: its flow ends here
    expect(page.locator(".messages")).to_contain_text(last)
    page.context.close()


def _qc_card_claimed(browser, site: str, key: str, name: str, **queue):
    """A QC queue recording a RIN (1 to 100) and pass or fail, one item of it claimed by the
    scientist on a tablet: the page, the item's card and its EUID."""
    make_queue(key, display_name="QC", **queue, result_fields=[
        {"key": "rin", "label": "RIN", "kind": "number", "min": 1, "max": 100,
         "required": True},
        {"key": "qc", "label": "QC", "kind": "pass_fail", "required": True}])
    euid = make_subject(key, name=name)
    page = ui.signed_in(browser, site, "scientist", width=768)
    page.goto(f"{site}/queues/{key}/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    return page, page.locator(f'#my-leases [data-euid="{euid}"]'), euid

def test_a_scientist_records_qc_results_on_a_tablet(browser, site):
    """The Complete form asks for what the QC step records: a RIN typed on the number pad
    (out of its bounds: refused in words, given back), pass or fail as two wide targets; the
    banner says what was recorded. A decimal comma is a decimal: the number field dropped
    the comma of "8,4" and 84 was sent."""
    page, card, euid = _qc_card_claimed(browser, site, "qcr", "Extract for QC")
    # half-way through typing, the claim renewed: what was typed is still there
    card.get_by_label("RIN").fill("7.5")
    card.get_by_role("button", name="Renew").click()
    expect(page.locator(".messages")).to_contain_text("is yours for another")
    card = page.locator(f'#my-leases [data-euid="{euid}"]')
    expect(card.get_by_label("RIN")).to_have_value("7.5")
    card.get_by_label("RIN").fill("120")
    card.get_by_role("radio", name="Pass").check()
    card.get_by_role("button", name="Complete").click()
    expect(page.locator(".messages")).to_contain_text("RIN must be from 1 to 100.")
    assert selectors.leases(status="ACTIVE")[0]["subject_euid"] == euid
    card = page.locator(f'#my-leases [data-euid="{euid}"]')
    expect(card.get_by_label("RIN")).to_have_value("120")  # given back as typed
    # and the focus is on it: the page came back with the focus at its top, the card far
    # below on a tablet
    expect(card.get_by_label("RIN")).to_be_focused()
    box = card.get_by_role("radio", name="Fail").locator("xpath=..").bounding_box()
    assert box is not None and box["height"] >= 44
    card.get_by_label("RIN").fill("8,4")
    card.get_by_role("radio", name="Pass").check()
    card.get_by_role("button", name="Complete").click()
    page.wait_for_url(f"{site}/my-work/")
    expect(page.locator(".messages")).to_contain_text("(recorded RIN 8.4, QC pass)")
    record = selectors.subject_history(selectors.subject_diagnostics(euid).uid)["records"][0]
    assert record["props"]["result_snapshot"] == {"rin": 8.4, "qc": "pass"}
    page.context.close()


def test_a_complete_refused_for_several_things_says_them_all_at_once(browser, site):
    """The browser's own check stopped the form at the first empty required field, one
    bubble at a time; the server's answer, which lists every problem, was never reached.
    With several problems the focus starts at the list of them (a screen reader at the
    first field heard that field's problem alone)."""
    page, card, _ = _qc_card_claimed(browser, site, "qcm", "Extract for several",
                                     next_queue_keys=["q2"])
    card.get_by_label("RIN").fill("120")
    card.get_by_role("button", name="Complete").click()  # QC and the next queue left out
    said = page.locator(".messages li.error")
    expect(said).to_have_count(3)
    expect(said).to_have_text(["RIN must be from 1 to 100.", "Record QC: this step requires it.",
                               "Choose where the item goes next (or finish its flow) before"
                               " completing it."])
    assert page.evaluate("document.activeElement.matches('[role=status]')")
    assert page.evaluate("document.activeElement.contains(document.querySelector("
                         "'.messages li.error'))")
    page.context.close()

def test_sending_an_item_that_failed_its_check_on_asks_first(browser, site):
    """QC recorded as Fail and Complete -> the next queue sent a failed extract on to
    library prep in one tap, as if it had passed."""
    make_queue("lib", display_name="Library prep")
    make_queue("qcf", display_name="QC", default_next_queue_key="lib", result_fields=[
        {"key": "qc", "label": "QC", "kind": "pass_fail", "required": True}])
    euid = make_subject("qcf", name="Extract 12")
    page = ui.signed_in(browser, site, "scientist", width=768)
    page.goto(f"{site}/queues/qcf/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    card = page.locator(f'#my-leases [data-euid="{euid}"]')
    card.get_by_role("radio", name="Fail").check()
    card.get_by_role("button", name="Complete").click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text(f"Extract 12 ({euid}) is recorded as failing its check,"
                                   " and goes on to Library prep (lib) as if it had passed")
    expect(dialog.locator("#confirm-title")).to_have_text("Send a failed item on?")
    page.get_by_role("button", name="Go back").click()
    assert selectors.leases(status="ACTIVE")[0]["subject_euid"] == euid  # nothing sent
    card.get_by_role("radio", name="Pass").check()
    card.get_by_role("button", name="Complete").click()  # a pass goes on unasked
    page.wait_for_url(f"{site}/my-work/")
    assert selectors.leases(status="ACTIVE") == []
    assert envelope(euid)["next_queue_key"] == "lib"
    page.context.close()


@pytest.mark.parametrize("width", [1280, 800])
def test_renew_sits_on_its_own_row_above_the_complete_form(browser, site, width):
    """A card whose Complete form was short put Renew beside it, the next card under it: a
    gloved tap aimed at one card's Renew met the other's Next queue."""
    page, euid, item = _claimed_at_the_bench(browser, site, "Specimen on a row")
    page.set_viewport_size({"width": width, "height": 900})
    renew = item.get_by_role("button", name="Renew").bounding_box()
    complete = item.locator("form.complete").bounding_box()
    assert renew and complete and renew["y"] + renew["height"] <= complete["y"], (renew,
                                                                                 complete)
    page.context.close()


def test_a_due_time_moves_on_while_my_work_stays_open(browser, site):
    """A tablet left on My work read "Due in 20 h" all day: the words move on from how far
    off the server said it was, by the server's clock."""
    from datetime import timedelta

    from bloomops.execution import clock
    from bloomops.execution.envelope import ts

    euid = make_subject("q1", name="Due tube", due_at=ts(clock.now() + timedelta(
        hours=3, seconds=40)))
    page = ui.signed_in(browser, site, "scientist", width=800)
    page.clock.install()
    page.goto(f"{site}/queues/q1/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(WORK_VIEW)
    due = page.locator(f'#my-leases [data-euid="{euid}"] time[data-humane] .ago').first
    expect(due).to_have_text("in 3 h")
    page.clock.run_for("01:00:00")
    expect(due).to_have_text("in 2 h")
    page.context.close()


def test_a_scan_while_a_result_has_the_focus_completes_nothing(browser, site):
    """Pass tapped, then the next tube scanned (its label typed and Enter): the Complete form
    was sent, and an item nobody meant to complete moved on."""
    page, card, euid = _qc_card_claimed(browser, site, "qcs", "Extract scanned over")
    card.get_by_label("RIN").fill("7,2")
    card.get_by_role("radio", name="Pass").check()
    card.get_by_role("radio", name="Pass").focus()
    page.keyboard.type("Z-MX-NEXT")
    page.keyboard.press("Enter")
    card.get_by_label("RIN").focus()
    page.keyboard.press("Enter")
    page.wait_for_timeout(500)
    assert [lease["subject_euid"] for lease in selectors.leases(status="ACTIVE")] == [euid]
    expect(page.locator(".messages")).not_to_contain_text("Completed")
    page.context.close()


def test_results_typed_outlive_a_lost_send_and_go_once_recorded(browser, site):
    """Complete sent while the Wi-Fi had no route: the browser's error page, and Back showed
    the card with every result gone (the tab forgot them as the form left). They are kept
    until the claim is no longer held."""
    page, card, euid = _qc_card_claimed(browser, site, "qcn", "Extract on bad Wi-Fi")
    card.get_by_label("RIN").fill("8,1")
    card.get_by_role("radio", name="Pass").check()
    page.route("**/complete/", lambda route: route.abort("internetdisconnected"))
    card.get_by_role("button", name="Complete").click()
    page.wait_for_timeout(500)
    page.unroute("**/complete/")
    page.goto(f"{site}/my-work/")
    card = page.locator(f'#my-leases [data-euid="{euid}"]')
    expect(card.get_by_label("RIN")).to_have_value("8,1")
    expect(card.get_by_role("radio", name="Pass")).to_be_checked()
    card.get_by_role("button", name="Complete").click()
    expect(page.locator(".messages")).to_contain_text("(recorded RIN 8.1, QC pass)")
    # recorded, the claim no longer held: the tab forgets what was typed for it (once the
    # page's scripts have run: the banner is there before them, and a loaded machine is slow)
    page.wait_for_load_state("load")
    expect(page.locator("#my-work-held")).to_have_attribute("data-held", "")
    page.wait_for_function("() => !Object.keys(sessionStorage).some("
                           "k => k.startsWith('bloomops-typed|'))", timeout=15000)
    page.context.close()
