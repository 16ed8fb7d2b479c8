"""The answers of /scan/ behind the browser loop of test_browser_scan.py.
With htmx only the outcome and a fresh form guard come back; without JavaScript a claim
redirects back to /scan/; a resent scan replays; a malformed scan is a 400; refusals write
nothing."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from bloomops.execution import selectors
from bloomops.web import services
from tests.engine import counts, make_subject
from tests.web_support import form_for, signed_in

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def scan_form(client, euid: str) -> dict:
    return form_for(client.get("/scan/"), "/scan/", euid=euid)


def fresh_key(html: str) -> str:
    guard = re.search(r'<span id="scan-guard" hx-swap-oob="true">(.*?)</span>', html, re.S)
    assert guard, "the answer carries the form guard out of band"
    return re.search(r'name="idempotency_key" value="([0-9a-f]+)"', guard.group(1)).group(1)


def leases_of(euid: str) -> int:
    return sum(1 for x in selectors.leases() if x["subject_euid"] == euid)


def test_htmx_claim_answers_the_banner_and_a_fresh_key_without_leaving_scan(client, lab):
    euid = make_subject("q1", name="Specimen htmx")
    client = signed_in(client, lab["worker_human"])
    data = scan_form(client, euid)
    response = client.post("/scan/", data, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'id="scan-euid"' not in html  # the field is not swapped
    assert f"Claimed Specimen htmx ({euid})" in html and "Queue one" in html
    lease = next(x["euid"] for x in selectors.leases() if x["subject_euid"] == euid)
    assert f'href="/my-work/?item={lease}"' in html  # the claimed item's work view
    assert fresh_key(html) != data["idempotency_key"]
    assert leases_of(euid) == 1


def test_htmx_refusal_is_the_outcome_with_its_status_and_writes_nothing(client, lab):
    held_back = make_subject("q1")
    client = signed_in(client, lab["worker_human"])
    services.ensure_my_worker(lab["worker_human"])  # registered on first use, not by a refusal
    data = scan_form(client, "Z-MX-404404")
    before = counts()
    response = client.post("/scan/", data, **HTMX)
    html = response.content.decode()
    assert response.status_code == 404
    assert "Not claimed: <code>Z-MX-404404</code>" in html
    assert "No subject has this EUID or name." in html
    assert fresh_key(html) != data["idempotency_key"]
    assert counts() == before
    assert leases_of(held_back) == 0


def test_without_javascript_a_claim_comes_back_to_scan_once(client, lab):
    euid = make_subject("q1", name="Specimen plain")
    client = signed_in(client, lab["worker_human"])
    response = client.post("/scan/", scan_form(client, euid))
    assert response.status_code == 302 and response["Location"] == "/scan/"
    page = client.get("/scan/").content.decode()
    assert f"Claimed Specimen plain ({euid})" in page
    assert re.search(r'id="scan-euid" name="euid" value=""\s+autofocus', page)
    assert "Claimed" not in client.get("/scan/").content.decode()  # shown once, not on reload


def test_a_refused_scan_does_not_put_the_euid_back_in_the_field(client, lab):
    client = signed_in(client, lab["worker_human"])
    html = client.post("/scan/", scan_form(client, "Z-MX-NOPE")).content.decode()
    assert "Not claimed: <code>Z-MX-NOPE</code>" in html
    assert re.search(r'id="scan-euid" name="euid" value=""\s+autofocus', html)


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["plain", "htmx"])
def test_a_scan_sent_twice_claims_once_and_shows_the_claim_again(client, lab, headers):
    euid = make_subject("q1", name="Specimen twice")
    client = signed_in(client, lab["worker_human"])
    data = scan_form(client, euid)
    client.post("/scan/", data, **headers)
    before = counts()
    again = client.post("/scan/", data, **headers)
    html = (again if headers else client.get("/scan/")).content.decode()
    assert f"Claimed Specimen twice ({euid})" in html
    assert "sent already" in html and "Not claimed" not in html
    assert counts() == before and leases_of(euid) == 1


@pytest.mark.parametrize("euid", ["Z-MX-\x00", "Z-MX-" + "7" * 300, "Z-MX-\x1b[2J"],
                         ids=["nul", "oversize", "control"])
@pytest.mark.parametrize("headers", [{}, HTMX], ids=["plain", "htmx"])
def test_a_malformed_scan_is_refused_plainly(client, lab, euid, headers):
    client = signed_in(client, lab["worker_human"])
    data = scan_form(client, euid)
    before = counts()
    response = client.post("/scan/", data, **headers)
    assert response.status_code == 400
    assert "That is not an EUID or a name; scan the label again." in response.content.decode()
    assert counts() == before


def test_htmx_scan_by_a_role_that_may_not_claim_is_refused_in_place(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = scan_form(client, euid)
    before = counts()
    response = client.post("/scan/", data, **HTMX)
    assert response.status_code == 403 and "Not claimed" in response.content.decode()
    assert counts() == before


@pytest.mark.parametrize(("envelope", "words", "not_said"), [
    ({"state": "COMPLETED", "terminal": True, "next_queue_key": None},
     "It is finished: its work was completed", ["terminal state", "not routed"]),
    ({"state": "HELD", "hold_state": "ACTIVE", "hold_reason": "label smudged"},
     "An active hold: label smudged", ["is not eligible"]),
    ({"state": "PENDING"}, "It has not been sent to any queue yet", ["is not eligible"]),
])
def test_a_scan_refused_by_the_item_s_state_says_it_in_words(client, lab, envelope, words,
                                                             not_said):
    """Was "The subject is in terminal state COMPLETED. The subject is not routed to a
    queue." and "State HELD is not eligible in q1 (READY, FAILED_RETRYABLE)."."""
    euid = make_subject("q1", **envelope)
    client = signed_in(client, lab["worker_human"])
    html = client.post("/scan/", scan_form(client, euid), **HTMX).content.decode()
    assert words in html
    assert not [w for w in not_said if w in html]


def test_a_tube_labelled_with_the_lab_s_own_name_is_claimed_by_it(client, lab):
    """A lab whose tubes carry their own IDs scanned "SPEC-001" and was told "No subject
    SPEC-001": only our EUIDs were read."""
    euid = make_subject("q1", name="Spec-001")
    client = signed_in(client, lab["worker_human"])
    response = client.post("/scan/", scan_form(client, "spec-001 "), **HTMX)
    assert response.status_code == 200
    assert f"Claimed Spec-001 ({euid})" in response.content.decode()
    assert leases_of(euid) == 1
    # in the scientist's words: not "leased to you as Z-EX-…", not "(worker_human)"
    assert "it is yours now" in response.content.decode()
    assert "leased to you" not in response.content.decode()
    page = client.get("/scan/").content.decode()
    assert "sci (at the bench)" in page and "worker_human" not in page


def test_a_name_two_subjects_share_claims_neither_and_names_both(client, lab):
    first, second = make_subject("q1", name="Tube 7"), make_subject("q1", name="TUBE 7")
    client = signed_in(client, lab["worker_human"])
    services.ensure_my_worker(lab["worker_human"])
    before = counts()
    response = client.post("/scan/", scan_form(client, "tube 7"), **HTMX)
    html = response.content.decode()
    assert response.status_code == 400
    assert "2 subjects go by \u201ctube 7\u201d: " in html
    # what tells them apart: name, state, queue, site, when registered
    assert f"{first} (Tube 7, READY in q1, sfo, registered " in html
    assert f"{second} (TUBE 7, READY in q1, sfo, registered " in html
    # no "ask QA to rename one": bloomops renames nothing, so it sends nobody to do it here
    assert ("Scan the EUID of the one you hold, and tell QA: one name on two subjects is put"
            " right where they were registered, not here.") in html
    assert counts() == before


def test_a_label_reused_after_its_tube_s_work_ended_means_the_open_one(client, lab):
    """A lab that reuses its labels year after year was refused "17 subjects go by
    Library 100000": sixteen finished last year. The one whose work is not over is meant;
    two open ones are still ambiguous."""
    from tests.engine import act, actor

    done = make_subject("q1", name="Library 7")
    act("cancel_subject_execution", actor("operator", username="qa"), subject_euid=done,
        expected_state="READY", payload={"reason": "run finished"})
    current = make_subject("q1", name="library 7")
    client = signed_in(client, lab["worker_human"])
    response = client.post("/scan/", scan_form(client, "Library 7"), **HTMX)
    assert response.status_code == 200, response.content
    assert f"Claimed library 7 ({current})" in response.content.decode()
    make_subject("q1", name="LIBRARY 7")
    again = client.post("/scan/", scan_form(client, "Library 7"), **HTMX)
    assert again.status_code == 400 and "subjects go by" in again.content.decode()


def test_a_name_that_is_another_subject_s_euid_claims_neither(client, lab):
    """Tubes another system labelled carry EUIDs of the same form as ours: a tube named
    like one of our subjects' EUID claimed that other subject without a word."""
    ours = make_subject("q1")
    theirs = make_subject("q1", name=ours.lower())
    client = signed_in(client, lab["worker_human"])
    services.ensure_my_worker(lab["worker_human"])
    before = counts()
    response = client.post("/scan/", scan_form(client, ours.lower()), **HTMX)
    html = response.content.decode()
    assert response.status_code == 400 and f"{ours} (" in html and f"{theirs} (" in html
    assert counts() == before


@pytest.mark.parametrize("name", ["L" * 250, "ΟΔΌΣ 7", "İstanbul-3", "Straße 4"])
def test_every_name_a_subject_may_have_is_found_as_typed(client, lab, name):
    """Names of 201-300 characters were refused as EUIDs; PostgreSQL and Python lower some
    letters differently, and Inspect upper-cased the text before looking for the name."""
    euid = make_subject("q1", name=name)
    operator = signed_in(Client(), lab["operator"])
    assert operator.get("/subjects/", {"euid": name})["Location"] == f"/subjects/{euid}/"
    client = signed_in(client, lab["worker_human"])
    response = client.post("/scan/", scan_form(client, name), **HTMX)
    assert response.status_code == 200 and leases_of(euid) == 1


def test_inspect_finds_a_subject_by_its_name_and_never_fails_on_odd_text(client, lab):
    euid = make_subject("q1", name="Plate A/01")
    other = make_subject("q1", name="Spec-002")
    client = signed_in(client, lab["operator"])
    assert client.get("/subjects/", {"euid": "plate a/01"})["Location"] == f"/subjects/{euid}/"
    assert client.get("/subjects/", {"euid": "spec-002"})["Location"] == f"/subjects/{other}/"
    # "/" in a text that is no name was a 500 (no URL could carry it)
    for odd in ("A/B", "x?y", "Z-MX-1#", "%2F"):
        response = client.get("/subjects/", {"euid": odd}, follow=True)
        assert response.status_code == 404, odd



def test_at_the_limit_a_scan_still_says_what_it_found_first(client, lab, settings):
    """At 5 of 5 items an unknown label read "The worker already holds 5 of 5 allowed
    leases" (a name to check first, and words of the system, not of the person); a label
    shows as scanned, not upper-cased (µ became Μ); an item already yours says so first."""
    settings.BLOOMOPS_HUMAN_PROFILES = {"*": {"max_concurrent_leases": 1}}
    mine = make_subject("q1", name="échantillon µ-7")
    client = signed_in(client, lab["worker_human"])
    assert client.post("/scan/", scan_form(client, mine), **HTMX).status_code == 200
    unknown = client.post("/scan/", scan_form(client, "Specimen 9999"), **HTMX)
    html = unknown.content.decode()
    assert unknown.status_code == 404 and "No subject has this EUID or name." in html
    assert "Not claimed: <code>Specimen 9999</code>" in html
    # nothing to wait for: no subject to scan again once its reason is resolved
    assert "once the reason is resolved" not in html and "Scan the next item." in html
    again = client.post("/scan/", scan_form(client, "échantillon µ-7"), **HTMX).content.decode()
    assert "Already yours" in again and "Act on it in My work, or scan the next item." in again
    assert "once the reason is resolved" not in again  # nothing to resolve: it is theirs
    other = make_subject("q1", name="Tube 8")
    full = client.post("/scan/", scan_form(client, "tube 8"), **HTMX).content.decode()
    assert "You already hold 1 of the 1 items you may hold at once." in full
    assert leases_of(other) == 0
    # an item nobody could claim says why first: releasing work for it would be for nothing
    from tests.engine import act, actor

    held = make_subject("q1", name="Tube 10")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=held,
        expected_state="READY", payload={"reason": "label check"})
    refused = client.post("/scan/", scan_form(client, "Tube 10"), **HTMX).content.decode()
    assert "It is not available to claim right now (and you hold as many" in refused
    assert "Complete or release one" not in refused


def test_inspect_of_a_shared_name_lists_what_tells_the_subjects_apart(client, lab):
    first, second = make_subject("q1", name="Tube 9"), make_subject("q1", name="tube 9")
    operator = signed_in(client, lab["operator"])
    response = operator.get("/subjects/", {"euid": "TUBE 9"})
    html = response.content.decode()
    assert response.status_code == 404 and "2 subjects go by TUBE 9" in html
    table = html[html.index('id="named-subjects"'):]
    for euid, name in ((first, "Tube 9"), (second, "tube 9")):
        assert f'href="/subjects/{euid}/"' in table and f"<td>{name}</td>" in table
    assert table.count("<td>READY</td>") == 2 and table.count("<td>q1</td>") == 2


def test_a_scan_of_an_item_outside_the_person_s_scope_says_so_in_their_words(client, lab):
    """"Your profile does not cover this queue": the queue was theirs, the item's site was
    not, and they were left guessing."""
    from bloomops.accounts.models import PersonProfile
    from bloomops.execution import people

    default = people.human_profile(lab["worker_human"].username, {"worker_human"})
    PersonProfile.objects.create(user=lab["worker_human"], site_scope=["sfo"],
                                 capabilities=default["capabilities"])
    euid = make_subject("q1", name="RTP tube", props={"site": "rtp"})
    client = signed_in(client, lab["worker_human"])
    form = scan_form(client, euid)
    services.ensure_my_worker(lab["worker_human"])  # their worker, registered on first use
    before = counts()
    html = client.post("/scan/", form, **HTMX).content.decode()
    assert "This item&#x27;s site is rtp; you take sfo items only." in html
    assert "does not cover this queue" not in html
    assert counts() == before and leases_of(euid) == 0


def test_the_bench_pages_are_never_served_from_the_browser_s_cache(client, lab):
    """Back after completing an item showed "Work on Specimen 0081" with a live countdown,
    from the browser's cache, on a tablet others use: the bench pages are fetched anew."""
    client = signed_in(client, lab["worker_human"])
    for page in ("/scan/", "/my-work/"):
        assert "no-store" in client.get(page)["Cache-Control"], page


def test_a_form_sent_after_the_session_ended_is_said_not_done_and_its_words_kept(client, lab):
    """Idle past the session's end, "Record failure" landed on a page saying the address
    takes a form, and nothing said about the failure. Signed in again, the person is back on
    the page the form was on, told it was not done and what they wrote, and nothing was
    written."""
    from bloomops.accounts.models import StoredSession as Session

    before, sessions = counts(), Session.objects.count()
    sent = client.post("/leases/Z-EX-1/fail/", {"error_message": "tube cracked",
                                                "error_class": "PERMANENT_INPUT"},
                       HTTP_REFERER="http://testserver/my-work/")
    assert sent.status_code == 302
    assert sent["Location"] == "/accounts/login/?next=/my-work/"
    assert counts() == before
    page = client.get(sent["Location"]).content.decode()
    assert "What you sent was not done: sign in, then send it again." in page
    # the words are said back; kept nowhere else: a post from nobody signed in adds no
    # session row (anyone could post them without end)
    assert "What went wrong, as you wrote it, was not recorded: \u201ctube cracked\u201d" in page
    assert Session.objects.count() == sessions
