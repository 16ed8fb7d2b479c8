"""A person's requests overlap (two tabs, a page's polling, a double click): each keeps what
the others stored in the session meanwhile, and what must be done once per session is done
once (accounts/session_store.py)."""

from __future__ import annotations

import importlib

import pytest
from django.test import Client

from bloomops.accounts.models import ApiToken
from bloomops.accounts.session_store import SessionStore
from bloomops.accounts.sessions import ACTIVITY_KEY
from tests.engine import counts, make_queue
from tests.web_support import form_for, signed_in

pytestmark = pytest.mark.django_db
HEADER = "euid,name,template,queue,priority,due_date,site,platform,assay\n"


def _read(client: Client) -> SessionStore:
    """The session as a request that began now reads it (and saves it when it ends)."""
    store = SessionStore(client.cookies["sessionid"].value)
    store.keys()  # read now, as such a request does
    return store


def test_each_request_writes_only_what_it_changed(client, users):
    signed_in(client, users["operator"])
    one, two = _read(client), _read(client)
    one["a"], two["b"] = 1, 2
    one.save()
    two.save()  # read before one saved: Django wrote "a" away
    three, four = _read(client), _read(client)
    del three["a"]
    four["c"] = 3
    three.save()
    four.save()
    stored = _read(client)
    assert (stored.get("a"), stored.get("b"), stored.get("c")) == (None, 2, 3)
    assert stored.get("_auth_user_id") == str(users["operator"].pk)  # still signed in


def test_intake_results_outlive_a_page_another_tab_loaded_meanwhile(client, users):
    """Another tab's page load, which began before a Confirm ended and ended after it,
    stored the session as it had read it: the results page and its CSV were then 404, and
    Confirm again ran every row as 'Already done before'."""
    make_queue("q1", site_scope=["sfo"])
    signed_in(client, users["operator"])
    preview = client.post("/intake/preview/",
                          {"manifest": HEADER + ",Tube 90,specimen,q1,,,sfo,,\n"})
    confirm = form_for(preview, "/intake/confirm/")
    other_tab = _read(client)
    done = client.post("/intake/confirm/", confirm)
    other_tab[ACTIVITY_KEY] = other_tab[ACTIVITY_KEY] + 1.0
    other_tab.save()
    page = client.get(done["Location"])
    assert page.status_code == 200 and 'data-outcome="REGISTERED"' in page.content.decode()
    assert client.get(f"/intake/{confirm['batch_key']}/results.csv").status_code == 200


def test_a_token_form_sent_twice_at_once_gives_one_token(client, users, monkeypatch):
    """A double click on Give token: both requests passed the form's guard (each read the
    session before the other had given) and two tokens worked, one never seen."""
    tokens = importlib.import_module("bloomops.web.views.tokens")

    admin = signed_in(client, users["admin"])
    fields = form_for(admin.get("/people/svc/"), "/people/svc/tokens/", name="n", days="30",
                      reason="adapter")
    given, second = tokens.create_token, []

    def first_click_giving(*args, **kwargs):  # the second click arrives meanwhile
        if not second:
            second.append(admin.post("/people/svc/tokens/", fields, follow=True))
        return given(*args, **kwargs)

    monkeypatch.setattr(tokens, "create_token", first_click_giving)
    first = admin.post("/people/svc/tokens/", fields)
    assert first.status_code == 201
    assert "That form was sent before" in second[0].content.decode()
    assert ApiToken.objects.filter(user=users["worker_service"]).count() == 1
    # a form refused as it was filled in claims nothing: sent again, corrected, it gives
    fields = form_for(admin.get("/people/svc/"), "/people/svc/tokens/", name="m",
                      days="30", reason="")
    assert admin.post("/people/svc/tokens/", fields).status_code == 400
    assert admin.post("/people/svc/tokens/", {**fields, "reason": "a second adapter"}
                      ).status_code == 201


def test_a_second_confirm_while_the_first_runs_runs_nothing(client, users, monkeypatch):
    """Confirm clicked twice: the second replayed every row the first was registering and
    the kept results (and CSV) said 'Already done before' for rows this Confirm did."""
    intake = importlib.import_module("bloomops.web.views.intake")

    make_queue("q1", site_scope=["sfo"])
    signed_in(client, users["operator"])
    preview = client.post("/intake/preview/", {
        "manifest": HEADER + ",Tube 91,specimen,q1,,,sfo,,\n,Tube 92,specimen,q1,,,sfo,,\n"})
    confirm = form_for(preview, "/intake/confirm/")
    monkeypatch.setattr(intake, "CONFIRM_WAIT", 0.2)
    ran, second = intake.execute, []

    def first_click_running(req):
        if not second:
            before = counts()
            second.append(client.post("/intake/confirm/", confirm))
            assert counts() == before  # the second ran nothing
        return ran(req)

    monkeypatch.setattr(intake, "execute", first_click_running)
    first = client.post("/intake/confirm/", confirm, follow=True).content.decode()
    assert second[0].status_code == 302 and second[0]["Location"].endswith("?again=1")
    assert first.count('data-outcome="REGISTERED"') == 2 and "Already done before" not in first
    # a manifest refused whole claims nothing: confirmed again, it runs
    broken = form_for(client.post("/intake/preview/", {
        "manifest": HEADER + ",Tube 93,specimen,q1,,,sfo,,\n"}), "/intake/confirm/")
    assert client.post("/intake/confirm/", {**broken, "manifest": "nonsense"}
                       ).status_code == 400
    done = client.post("/intake/confirm/", broken, follow=True).content.decode()
    assert 'data-outcome="REGISTERED"' in done


def test_confirming_again_a_batch_whose_results_are_gone_runs_it_again(client, users,
                                                                       monkeypatch):
    """Claims were kept for 20 batches, results for 5: Confirm again of the sixth newest
    waited the whole wait and then answered 404."""
    intake = importlib.import_module("bloomops.web.views.intake")
    monkeypatch.setattr(intake, "CONFIRM_WAIT", 5.0)
    make_queue("q1", site_scope=["sfo"])
    signed_in(client, users["operator"])
    sent = []
    for n in range(intake.KEPT_BATCHES + 1):
        preview = client.post("/intake/preview/",
                              {"manifest": HEADER + f",Tube 6{n},specimen,q1,,,sfo,,\n"})
        sent.append(form_for(preview, "/intake/confirm/"))
        assert client.post("/intake/confirm/", sent[-1]).status_code == 302
    again = client.post("/intake/confirm/", sent[0], follow=True)
    assert again.status_code == 200 and "Already done before" in again.content.decode()


def test_a_confirm_that_failed_can_be_sent_again(client, users, monkeypatch):
    """A Confirm that ended in a 500 kept its claim (a 5xx's session is not saved): sent
    again, it waited and answered 404, never run."""
    intake = importlib.import_module("bloomops.web.views.intake")
    monkeypatch.setattr(intake, "CONFIRM_WAIT", 5.0)
    make_queue("q1", site_scope=["sfo"])
    signed_in(client, users["operator"])
    fields = form_for(client.post("/intake/preview/", {
        "manifest": HEADER + ",Tube 77,specimen,q1,,,sfo,,\n"}), "/intake/confirm/")
    ran = intake.execute

    def gone(req):
        raise RuntimeError("database went away")

    monkeypatch.setattr(intake, "execute", gone)
    client.raise_request_exception = False
    assert client.post("/intake/confirm/", fields).status_code == 500
    monkeypatch.setattr(intake, "execute", ran)
    done = client.post("/intake/confirm/", fields, follow=True).content.decode()
    assert 'data-outcome="REGISTERED"' in done


def test_giving_back_a_claim_leaves_another_tab_s_and_the_latest_activity_stays(client,
                                                                                users):
    from bloomops.accounts.sessions import ACTIVITY_KEY

    signed_in(client, users["operator"])
    tab_a, tab_b = _read(client), _read(client)
    assert tab_a.add_once("claims", "A", keep=20) and tab_b.add_once("claims", "B", keep=20)
    tab_a.discard_once("claims", "A")
    assert _read(client)["claims"] == ["B"]
    old, new = _read(client), _read(client)
    old[ACTIVITY_KEY], new[ACTIVITY_KEY] = 1000.0, 2000.0
    new.save()
    old.save()  # a long request that began earlier ends later
    assert _read(client)[ACTIVITY_KEY] == 2000.0


def test_a_claim_in_a_session_ended_meanwhile_is_a_400_not_a_500(client, users):
    """Signed out in another tab while a Confirm or a token form ran: the claim's write
    found no session and raised a server error."""
    from django.contrib.sessions.exceptions import SessionInterrupted

    from bloomops.accounts.models import StoredSession

    signed_in(client, users["operator"])
    tab = _read(client)
    StoredSession.objects.all().delete()
    with pytest.raises(SessionInterrupted):
        tab.add_once("claims", "A", keep=5)
