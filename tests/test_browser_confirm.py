"""Confirmations of destructive operator actions in a real browser (Chromium): the dialog
spells out the consequence and the reason before anything is sent; going back sends
nothing; confirming sends once and the history shows the reason. And select-all with a
bulk hold on the workbench."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bloomops.execution import selectors
from bloomops.web import services
from tests.engine import act, actor, counts, envelope, make_subject
from tests.test_browser_ui import browser, messages_text, signed_in, site  # noqa: F401

pytestmark = [pytest.mark.browser]


def test_cancel_asks_first_going_back_sends_nothing(browser, site):  # noqa: F811
    euid = make_subject("q1", name="Specimen to keep")
    page = signed_in(browser, site, "qa", width=1024)
    page.goto(f"{site}/subjects/{euid}/")
    # the actions are above the fold at 1024 px, before the envelope; "Cancel" alone read as
    # "close this form", and it ends the work for good
    cancel = page.get_by_role("button", name="Cancel the work", exact=True)
    expect(cancel).to_be_in_viewport()
    page.get_by_label("Cancel reason").fill("duplicate tube")
    before = counts()
    cancel.click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("h2")).to_have_text("Cancel the work?")
    expect(page.get_by_role("button", name="Yes, cancel the work")).to_be_visible()
    expect(dialog).to_contain_text("ends for good")
    expect(dialog).to_contain_text("Reason to be recorded: duplicate tube")
    page.get_by_role("button", name="Go back").click()
    expect(dialog).to_be_hidden()
    assert counts() == before and envelope(euid)["state"] == "READY"
    # Escape is going back too
    cancel.click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert counts() == before
    page.context.close()


def test_confirmed_release_is_sent_once_and_the_history_shows_the_reason(browser, site):  # noqa: F811
    euid = make_subject("q1", name="Specimen held")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
        expected_state="READY", payload={"reason": "label smudged", "hold_code": "LABEL_ISSUE"})
    page = signed_in(browser, site, "qa")
    page.goto(f"{site}/subjects/{euid}/")
    page.get_by_label("Release reason").fill("relabelled and checked")
    page.get_by_role("button", name="Release hold").click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text("returns to q1")
    expect(dialog).to_contain_text("Reason to be recorded: relabelled and checked")
    yes = page.get_by_role("button", name="Yes, release hold")
    yes.evaluate("b => { b.click(); b.click(); }")  # pressed twice, sent once
    expect(page.locator(".messages")).to_contain_text(f"Hold on {euid} released.")
    history = page.locator("#actions")
    expect(history).to_contain_text("release_execution_hold")
    expect(history).to_contain_text("relabelled and checked")
    uid = selectors.subject_diagnostics(euid).uid
    releases = [a for a in selectors.action_history(uid)
                if a["action_key"] == "release_execution_hold"]
    assert len(releases) == 1 and releases[0]["reason"] == "relabelled and checked"
    assert "already done" not in messages_text(page).lower()
    page.context.close()


def test_admin_confirms_a_drain_with_its_reason(browser, site):  # noqa: F811
    from django.contrib.auth.models import User

    worker = services.ensure_my_worker(User.objects.get(username="scientist"))
    page = signed_in(browser, site, "admin")
    page.goto(f"{site}/workers/")
    row = page.locator(f'#workers tr[data-worker="{worker}"]')
    expect(row.get_by_role("button", name="Enable")).to_have_count(0)  # it is online
    row.locator("summary", has_text="Drain").click()
    row.get_by_label("Reason").first.fill("bench maintenance")
    row.get_by_role("button", name="Drain scientist").click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text("takes no new work")
    expect(dialog).to_contain_text("Reason to be recorded: bench maintenance")
    page.get_by_role("button", name="Yes, drain scientist").click()
    expect(page.locator(".messages")).to_contain_text("is now draining")
    # now it offers Enable and Disable, not Drain
    row = page.locator(f'#workers tr[data-worker="{worker}"]')
    expect(row.get_by_role("button", name="Enable")).to_have_count(1)
    expect(row.locator("summary", has_text="Drain")).to_have_count(0)
    assert selectors.workers(euid=worker)[0].props["drain_reason"] == "bench maintenance"
    expect(row).to_contain_text("why: bench maintenance")
    page.context.close()


def test_select_all_and_bulk_hold_on_the_workbench(browser, site):  # noqa: F811
    from django.contrib.auth.models import User

    sci = actor("worker_human", username="scientist")
    worker = services.ensure_my_worker(User.objects.get(username="scientist"))
    items = []
    for n in range(3):
        euid = make_subject("q1", name=f"Retrying {n}")
        lease = act("claim_queue_item", sci, worker_euid=worker, subject_euid=euid)
        act("fail_queue_execution", sci, worker_euid=worker, lease_euid=lease["lease_euid"],
            expected_state="READY", payload={"retryable": True, "error_message": "timeout"})
        items.append(euid)
    page = signed_in(browser, site, "qa", width=1024)
    page.goto(f"{site}/workbench/")
    # nothing ticked: said at the form, the reason typed kept, nothing sent (the server's
    # "Select at least one item" came back without the reason, and said not which list)
    page.locator("#bulk-retrying").get_by_label("Reason").fill("typed with gloves")
    page.get_by_role("button", name="Hold selected").click()
    expect(page.locator("#bulk-retrying .none-picked")).to_have_text(
        "Nothing is selected: tick the rows to act on first.")
    expect(page.locator("#bulk-retrying").get_by_label("Reason")).to_have_value(
        "typed with gloves")
    assert selectors.active_holds() == []
    select_all = page.get_by_label("Select all retrying items")
    box = select_all.bounding_box()
    assert box and box["width"] >= 24 and box["height"] >= 24  # a gloved finger's target
    select_all.check()
    for euid in items:
        expect(page.get_by_label(f"Select {euid}")).to_be_checked()
    page.get_by_label(f"Select {items[2]}").uncheck()
    assert select_all.evaluate("el => el.indeterminate") is True
    select_all.check()
    page.locator("#bulk-retrying").get_by_label("Hold code").select_option("QC_FAIL")
    page.locator("#bulk-retrying").get_by_label("Reason").fill("reagent lot recalled")
    page.get_by_role("button", name="Hold selected").click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text("Hold 3 selected item(s)")
    expect(dialog).to_contain_text("Reason to be recorded: QC_FAIL: reagent lot recalled")
    page.get_by_role("button", name="Yes, hold selected").click()
    expect(page.locator(".messages")).to_contain_text("Held 3")
    holds = {h["subject_euid"]: h["props"] for h in selectors.active_holds()}
    assert {e: (holds[e]["hold_code"], holds[e]["reason"]) for e in items} == {
        e: ("QC_FAIL", "reagent lot recalled") for e in items}
    expect(page.locator("#holds")).to_contain_text("reagent lot recalled")
    page.context.close()


def test_the_requeue_dialog_names_the_queue_chosen(browser, site):  # noqa: F811
    """It said "goes back to q1 (or the queue chosen)" whatever was chosen."""
    euid = make_subject("q1", name="Specimen to move")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
        expected_state="READY", payload={"reason": "check", "hold_code": "LABEL_ISSUE"})
    act("release_execution_hold", actor("operator", username="qa"), subject_euid=euid,
        expected_state="HELD", payload={"reason": "checked"})
    page = signed_in(browser, site, "qa")
    page.goto(f"{site}/subjects/{euid}/")
    page.get_by_label("To queue").select_option("q2")
    page.get_by_label("Requeue reason").fill("wrong line")
    before = counts()
    page.get_by_role("button", name="Requeue", exact=True).click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text(f"{euid} goes to Queue two (q2) as ready for anyone to claim")
    page.get_by_role("button", name="Go back").click()
    assert counts() == before
    page.context.close()
