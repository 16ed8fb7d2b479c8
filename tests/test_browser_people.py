"""The People screen in a real browser: an admin gives a bench scientist a profile of their
own, with a reason; the change is in the person's history, and the dashboard's coverage counts
the scientist as rostered before they ever sign in."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bloomops.accounts.models import PersonProfile, ProfileChange
from bloomops.execution.context import Actor
from tests.engine import claim, make_queue, make_subject, register
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


def test_admin_gives_a_service_account_a_token_copies_it_and_revokes_it(
        browser, site):  # noqa: F811  (the fixtures imported above)
    import urllib.error
    import urllib.request

    from django.contrib.auth.models import Group, User

    User.objects.create_user("svc-robot").groups.add(Group.objects.get(name="worker_service"))

    def api_answers(token: str) -> int:
        ask = urllib.request.Request(f"{site}/api/v1/execution/queues",
                                     headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(ask) as answer:
                return answer.status
        except urllib.error.HTTPError as refused:
            return refused.code

    page = signed_in(browser, site, "admin")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site)
    page.goto(f"{site}/people/svc-robot/")
    assert "has no API token" in page.locator("main").inner_text()
    page.get_by_label("Token name").fill("robot-arm")
    page.get_by_label("Why it is given").fill("the liquid handler's adapter")
    page.get_by_role("button", name="Give a token").click()
    token = page.get_by_label("The token").input_value()
    assert token.startswith("bo_") and api_answers(token) == 200
    page.get_by_role("button", name="Copy").click()
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == token
    # seen again, the page names the token by its prefix only
    page.goto(f"{site}/people/svc-robot/")
    assert token not in page.content()
    row = page.locator("#token-list tbody tr").first
    assert "robot-arm" in row.inner_text() and "active" in row.inner_text()
    row.get_by_label("Why revoke").fill("the adapter was retired")
    row.get_by_role("button", name="Revoke").click()
    # asked first: a service calling with it is refused from its next request
    dialog = page.locator("#confirm-dialog")
    assert "stops working now" in dialog.inner_text() and api_answers(token) == 200
    dialog.get_by_role("button", name="Yes, revoke the token").click()
    assert "is revoked" in page.locator(".messages").inner_text()
    assert "revoked" in page.locator("#token-list tbody tr").first.inner_text()
    assert api_answers(token) == 401
    history = page.locator("#person-history").inner_text()
    assert "the liquid handler's adapter" in history and "the adapter was retired" in history
    page.context.close()


def test_taking_sign_in_away_names_what_the_person_still_holds_first(
        browser, site):  # noqa: F811  (the fixtures imported above)
    """An admin unticked a scientist's sign-in and saved: their sessions and tokens ended and
    their claimed item stayed locked to them, with nothing asked before."""
    from django.contrib.auth.models import User

    scientist = Actor(username="scientist", roles=frozenset({"worker_human"}))
    make_subject("q1", name="Held tube")
    claim(scientist, register(scientist, worker_type="HUMAN_SESSION"), "q1")
    page = signed_in(browser, site, "admin")
    page.goto(f"{site}/people/scientist/")
    page.get_by_label("Reason").fill("left the lab")
    # a save that takes nothing away asks nothing: the lease limit alone
    page.get_by_label("Use the lab-wide default profile").uncheck()
    page.get_by_label("Lease limit").fill("3")
    page.get_by_role("button", name="Save").click()
    assert "changed" in page.locator(".messages").inner_text()
    page.get_by_label("Reason").fill("left the lab")
    page.get_by_label("May sign in").uncheck()
    page.get_by_role("button", name="Save").click()
    dialog = page.locator("#confirm-dialog")
    said = dialog.inner_text()
    assert "This change takes something away from scientist." in said
    assert "Taking their sign-in ends their sessions now" in said
    # what this Save takes, not what another might: their bench role stays
    assert "bench role" not in said and "{" not in said
    assert "Either way, the 1 item they hold stays claimed by them" in said
    dialog.get_by_role("button", name="Go back").click()
    assert User.objects.get(username="scientist").is_active  # nothing sent
    page.get_by_role("button", name="Save").click()
    dialog.get_by_role("button", name="Yes, save").click()
    assert "can no longer sign in" in page.locator(".messages").inner_text()
    assert not User.objects.get(username="scientist").is_active
    page.context.close()


def _save_asks(page, url: str, username: str, box) -> str:
    """What Save asks on ``username``'s page once ``box`` (on that page) is unticked."""
    page.goto(f"{url}/people/{username}/")
    page.get_by_label("Reason").fill("a change of duties")
    box.uncheck()
    page.get_by_role("button", name="Save").click()
    return page.locator("#confirm-dialog").inner_text()


def test_taking_the_bench_role_alone_names_that_alone(browser, site):  # noqa: F811
    """Unticking worker_human alone was confirmed with "Taking their sign-in ends their
    sessions now" beside it: the admin asked what else they had changed."""
    page = signed_in(browser, site, "admin")
    said = _save_asks(page, site, "scientist",
                      page.locator("input[name=roles][value=worker_human]"))
    assert "Taking their bench role stops them claiming work." in said
    assert "sign-in" not in said and "{" not in said
    page.context.close()


def test_an_operators_and_an_admins_save_say_only_what_applies(browser, site):  # noqa: F811
    """An operator's unticked sign-in read "... ends their sessions now.{bench}"; every Save
    of an admin's page asked whether to take a bench role they do not have."""
    from django.contrib.auth.models import Group, User

    qa = User.objects.create_user("qa-lead2", password="not-used-here-1")
    qa.groups.add(Group.objects.get(name="operator"))
    page = signed_in(browser, site, "admin")
    said = _save_asks(page, site, "qa-lead2", page.get_by_label("May sign in"))
    assert "Taking their sign-in ends their sessions now." in said and "{" not in said
    page.get_by_role("button", name="Go back").click()
    page.goto(f"{site}/people/admin/")
    page.get_by_label("Reason").fill("a note")
    page.get_by_label("Use the lab-wide default profile").uncheck()
    page.get_by_label("Lease limit").fill("4")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("changed")
    expect(page.locator("#confirm-dialog")).to_be_hidden()
    page.context.close()
