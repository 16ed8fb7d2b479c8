"""Two-person release of an integrity hold in a real browser (docs/RULES.md#approvals):
operator A is refused and asks; operator B approves in the inbox, signing with a re-entered
password (a wrong one is refused); the hold is released and the history shows who approved."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.engine import act, actor, envelope, make_subject
from tests.test_browser_ui import PASSWORD, browser, signed_in, site  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser]


def test_a_second_operator_signs_the_release_of_an_integrity_hold(browser, site):  # noqa: F811
    euid = make_subject("q1", name="Specimen with a failed control")
    hold = act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
               expected_state="READY",
               payload={"hold_code": "QC_FAIL", "reason": "control out of range"})["hold_euid"]

    asker = signed_in(browser, site, "qa")
    asker.goto(f"{site}/subjects/{euid}/")
    # The release would be refused, so the inspector offers to ask for approval instead.
    expect(asker.get_by_role("button", name="Release hold")).to_have_count(0)
    ask = asker.locator("form[data-gated=release_execution_hold]")
    expect(ask).to_contain_text("Releasing an integrity hold needs a second person's approval")
    ask.get_by_label("Why release").fill("QC rerun passed, see run 42")
    ask.get_by_role("button", name="Ask for approval to release").click()
    expect(asker.locator(".messages")).to_contain_text("Approval requested")
    assert envelope(euid)["state"] == "HELD"
    asker.context.close()

    approver = signed_in(browser, site, "supervisor")
    expect(approver.locator("#nav-approvals")).to_contain_text("1")
    approver.locator("#nav-approvals").click()
    row = approver.locator(f"#approvals-waiting tr:has-text('{euid}')")
    expect(row).to_contain_text(hold)
    expect(row).to_contain_text("QC_FAIL")
    expect(row).to_contain_text("qa")
    expect(row).to_contain_text("QC rerun passed, see run 42")
    row.get_by_label("Reason").fill("rerun report checked")
    row.get_by_label("Your password (signature)").fill("not my password")
    row.get_by_role("button", name="Approve and sign").click()
    approver.get_by_role("button", name="Yes, approve and sign").click()
    expect(approver.locator(".messages")).to_contain_text("password does not match")
    # the focus is on what says why, not at the page's top
    expect(approver.locator("[role=status]:has(.messages)")).to_be_focused()
    assert envelope(euid)["state"] == "HELD"

    row = approver.locator(f"#approvals-waiting tr:has-text('{euid}')")
    row.get_by_label("Reason").fill("rerun report checked")
    row.get_by_label("Your password (signature)").fill(PASSWORD)
    # Enter in the password field asks what is signed: it chose Approve unseen
    row.get_by_label("Your password (signature)").press("Enter")
    dialog = approver.locator("dialog#confirm-dialog")
    expect(dialog).to_contain_text("You sign an APPROVAL: Releasing an integrity hold on"
                                   " Specimen with a failed control")
    approver.get_by_role("button", name="Go back").click()
    assert envelope(euid)["state"] == "HELD"
    row.get_by_role("button", name="Approve and sign").click()
    approver.get_by_role("button", name="Yes, approve and sign").click()
    expect(approver.locator(".messages")).to_contain_text("Approved and signed")
    expect(approver.locator("#approvals-recent")).to_contain_text("approved by")
    assert envelope(euid)["state"] == "READY"

    approver.goto(f"{site}/subjects/{euid}/")
    expect(approver.locator(".badge.state")).to_have_text("READY")
    expect(approver.locator("#subject-approvals")).to_contain_text(
        "approved by supervisor,")  # the name once when it is the username
    expect(approver.locator("#subject-approvals")).to_contain_text(
        "Releasing an integrity hold")  # what it was for, in words
    history = approver.locator("#actions")
    expect(history.locator("tr:has-text('decide_approval')")).to_contain_text("supervisor")
    expect(history.locator("tr:has-text('decide_approval')")).to_contain_text(
        "rerun report checked")
    expect(history.locator("tr:has-text('release_execution_hold')")).to_contain_text(
        "supervisor")
    approver.context.close()


def test_withdrawing_a_request_asks_first(browser, site):  # noqa: F811
    """The approvals page never loaded the script that asks first: Withdraw ran on one click."""
    euid = make_subject("q1", name="Specimen asked about")
    qa = actor("operator", username="qa")
    hold = act("place_execution_hold", qa, subject_euid=euid, expected_state="READY",
               payload={"hold_code": "QC_FAIL", "reason": "control out of range"})["hold_euid"]
    act("request_approval", qa, subject_euid=euid, hold_euid=hold, payload={
        "action_key": "release_execution_hold", "reason": "rerun passed",
        "parameters": {"reason": "rerun passed"}})
    page = signed_in(browser, site, "qa")
    page.goto(f"{site}/approvals/")
    page.get_by_label("Why withdraw").fill("asked too early")
    page.get_by_role("button", name="Withdraw").click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("nobody can approve it any more")
    page.get_by_role("button", name="Go back").click()
    expect(page.locator("#approvals-waiting")).to_contain_text(euid)
    page.get_by_role("button", name="Withdraw").click()
    page.get_by_role("button", name="Yes, withdraw the request").click()
    expect(page.locator(".messages")).to_contain_text("withdrawn")
    page.context.close()


def test_an_open_dashboard_shows_a_new_request_and_its_badge(browser, site, monkeypatch):  # noqa: F811
    """The supervisor's open dashboard said "Approvals waiting (0)" with no badge long after
    a request was made: the panel asks again and brings the menu's count along."""
    from bloomops.web.templatetags import approvals_ui

    monkeypatch.setattr(approvals_ui, "PANEL_REFRESH_SECONDS", 1)
    euid = make_subject("q1", name="Specimen to release")
    hold = act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
               expected_state="READY",
               payload={"hold_code": "QC_FAIL", "reason": "control out of range"})["hold_euid"]
    page = signed_in(browser, site, "supervisor")
    expect(page.locator("#approvals-panel h2")).to_have_text("Approvals waiting (0)")
    expect(page.locator("#nav-approvals .badge")).to_have_count(0)
    act("request_approval", actor("operator", username="qa"), subject_euid=euid,
        hold_euid=hold, payload={"action_key": "release_execution_hold",
                                 "parameters": {"reason": "rerun passed"},
                                 "reason": "QC rerun passed"})
    expect(page.locator("#approvals-panel h2")).to_have_text("Approvals waiting (1)")
    expect(page.locator("#nav-approvals .badge")).to_contain_text("1")
