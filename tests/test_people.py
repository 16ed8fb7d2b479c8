"""A lab's own people (docs/RULES.md#human-workers): admins keep each person's roles and
worker profile on /people/, every change is recorded with who, when and why, a refusal writes
nothing, and a person's human worker takes its profile from there."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages

from bloomops.accounts.models import PersonProfile, ProfileChange
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import load
from bloomops.web import services
from tests.engine import act, actor, make_queue, make_subject
from tests.test_db_roles import (
    django_as,
    raw_runtime_connection,
    runtime,  # noqa: F401  (a fixture)
)
from tests.web_support import form_for, signed_in


def _roles(user: User) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


def _written() -> tuple:
    """Everything a change of a person writes."""
    return (ProfileChange.objects.count(), list(PersonProfile.objects.values_list(
        "user__username", "capabilities", "max_concurrent_leases").order_by("user__username")),
            sorted(User.objects.values_list("username", "is_active", "groups__name")))


def _page_form(client, username: str, **overrides) -> dict:
    """The person form as the page rendered it (checkboxes are sent as a browser would)."""
    page = client.get(f"/people/{username}/")
    assert page.status_code == 200
    fields = form_for(page, f"/people/{username}/", **overrides)
    if "capabilities" not in overrides:  # a textarea: its text, as the page showed it
        fields["capabilities"] = page.context["form"].initial["capabilities"]
    if "roles" not in overrides:
        fields["roles"] = page.context["form"].initial["roles"]
    for box in ("is_active", "use_default"):
        if box not in overrides and page.context["form"].initial[box]:
            fields[box] = "on"
    return fields


# ------------------------------------------------------------------ the screen and its roles


@pytest.mark.parametrize("role", ["worker_service", "worker_human", "operator"])
def test_only_admins_see_or_change_people(client, users, role):
    client = signed_in(client, users[role])
    before = _written()
    assert client.get("/people/").status_code == 403
    assert client.get("/people/sci/").status_code == 403
    response = client.post("/people/sci/", {"roles": ["admin"], "is_active": "on",
                                            "capabilities": "compute.qc",
                                            "max_concurrent_leases": "9", "reason": "promote"})
    assert response.status_code == 403
    assert _written() == before
    assert b'href="/people/"' not in client.get("/").content  # no link to a screen they lack


def test_signed_out_visitors_are_sent_to_sign_in(client, users):
    response = client.get("/people/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    before = _written()
    assert client.post("/people/sci/", {"reason": "x"}).status_code == 302
    assert _written() == before


def test_an_admin_sees_everyone_with_their_roles_and_effective_profile(client, users):
    PersonProfile.objects.create(user=users["worker_human"], capabilities=["wetlab.qc"],
                                 site_scope=["sfo"], max_concurrent_leases=2)
    html = signed_in(client, users["admin"]).get("/people/").content.decode()
    assert 'href="/people/"' in html  # in the admin's navigation
    # the page's title is its name (the add form, its CSRF token too, had slipped into it)
    title = html[html.index("<title>"):html.index("</title>")]
    assert title.startswith("<title>People") and "<" not in title[7:]
    assert html.count('id="new-person"') == 1
    sci = html[html.index('data-person="sci"'):]
    sci = sci[:sci.index("</tr>")]
    assert "worker_human" in sci and "wetlab.qc" in sci and "site sfo" in sci and ">own<" in sci
    op = html[html.index('data-person="op"'):]
    op = op[:op.index("</tr>")]
    assert "lab default" in op
    # an operator works at no bench: the lab-wide default was listed as their capabilities,
    # as if six people could cover library prep
    assert "wetlab.extraction" not in op and "not at the bench" in op
    assert "not at the bench" not in sci


def test_the_people_screen_says_what_each_role_may_do(client, users):
    """A new lab's admin met worker_human, operator and worker_service bare, with nothing
    saying which is the bench scientist and which is QA."""
    html = signed_in(client, users["admin"]).get("/people/").content.decode()
    legend = html.split('id="role-duties">')[1].split("</details>")[0]
    for role, words in (("worker_human", "a bench scientist"), ("operator", "QA and"),
                        ("admin", "sets the lab up"), ("worker_service", "not a person")):
        assert f"<code>{role}</code></dt><dd>{words}" in legend, role


def test_an_admin_changes_a_persons_profile_and_roles_with_a_reason(client, users):
    make_queue("q1", required_worker_capabilities=["wetlab.qc"])
    client = signed_in(client, users["admin"])
    page = client.get("/people/sci/")
    assert "Steps the queues ask for: wetlab.qc" in page.content.decode()
    fields = _page_form(client, "sci", capabilities="wetlab.qc\ncompute.qc, wetlab.qc",
                        site_scope="sfo, bos", max_concurrent_leases="3",
                        roles=["worker_human", "operator"], reason="now leads QC in SFO")
    fields.pop("use_default", None)
    # a site no queue is scoped to is most often a typo: asked before anything is saved
    # (compute.qc was in the lab-wide default profile this person had: not asked again)
    before = _written()
    refused = client.post("/people/sci/", fields)
    assert refused.status_code == 400 and _written() == before
    asked = refused.content.decode()
    assert ("No queue is scoped to site sfo, bos yet: check the spelling, or tick &quot;Save"
            " values no queue names yet, as typed&quot; below and save again.") in asked
    assert "capabilities" not in refused.context["form"].errors
    assert 'name="keep_unnamed"' in asked and 'id="person-refused"' in asked
    response = client.post("/people/sci/", {**fields, "keep_unnamed": "on"})
    assert response.status_code == 302
    # saved as confirmed (a queue may ask for it later), and still said
    told = client.get(response["Location"]).content.decode()
    assert "No queue asks for compute.qc yet: check the spelling." in told
    stored = PersonProfile.objects.get(user=users["worker_human"])
    assert stored.capabilities == ["wetlab.qc", "compute.qc"]  # order kept, duplicate dropped
    assert stored.site_scope == ["sfo", "bos"] and stored.platform_scope == []
    assert stored.max_concurrent_leases == 3
    assert _roles(users["worker_human"]) == ["operator", "worker_human"]
    change = ProfileChange.objects.get()
    assert (change.username, change.changed_by, change.reason) == ("sci", "adm",
                                                                  "now leads QC in SFO")
    assert change.before["own_profile"] is False and change.after["own_profile"] is True
    assert change.before["roles"] == ["worker_human"]
    assert change.after["roles"] == ["operator", "worker_human"]
    assert {"capabilities", "max_concurrent_leases", "roles"} <= set(change.changed_fields())
    html = client.get("/people/sci/").content.decode()
    history = html[html.index('id="person-history"'):]
    assert "adm" in history and "now leads QC in SFO" in history and "compute.qc" in history
    # values read as words, not Python ("['sfo', 'bos']", "False")
    # a person who had no profile of their own had the lab-wide default, not nothing
    assert "<code>site_scope</code>: lab default → sfo, bos" in history
    assert "<code>own_profile</code>: no → yes" in history and "[&#x27;" not in history
    # back to the lab-wide default: the profile goes, the change is recorded too
    fields = _page_form(client, "sci", use_default="on", reason="left the QC team")
    assert client.post("/people/sci/", fields).status_code == 302
    assert not PersonProfile.objects.filter(user=users["worker_human"]).exists()
    assert ProfileChange.objects.count() == 2
    history = client.get("/people/sci/").content.decode().split('id="person-history"')[1]
    assert "<code>site_scope</code>: sfo, bos → lab default" in history


def test_a_scope_no_queue_names_is_saved_only_when_confirmed(client, users):
    """A misspelt site ("sfx") was saved without a word, and kept the person from every queue
    scoped by site: a scope meets a queue's only where the two overlap. Then it was saved and
    warned about after; now the admin is asked first, and nothing is saved until they confirm."""
    make_queue("q1", required_worker_capabilities=["wetlab.qc"], site_scope=["sfo", "bos"],
               assay_scope=["wgs"])
    client = signed_in(client, users["admin"])
    page = client.get("/people/sci/").content.decode()
    assert "Named by the queues' scopes: bos, sfo" in page
    fields = _page_form(client, "sci", capabilities="wetlab.qc", site_scope="sfx, bos",
                        assay_scope="wgs", platform_scope="ont", max_concurrent_leases="3",
                        reason="moves to the Boston bench")
    fields.pop("use_default", None)
    before = _written()
    refused = client.post("/people/sci/", fields)
    assert refused.status_code == 400 and _written() == before
    form = refused.context["form"]
    assert [e.split(":")[0] for e in form.errors["site_scope"]] == [
        "No queue is scoped to site sfx yet"]
    assert [e.split(":")[0] for e in form.errors["platform_scope"]] == [
        "No queue is scoped to platform ont yet"]
    assert "capabilities" not in form.errors and "assay_scope" not in form.errors
    # the typed values stay in the form, to be mended or confirmed
    assert form["site_scope"].value() == "sfx, bos"
    response = client.post("/people/sci/", {**fields, "keep_unnamed": "on"})
    assert response.status_code == 302
    told = [str(m) for m in get_messages(response.wsgi_request)]
    assert [m for m in told if m.startswith("No queue")] == [  # wgs, wetlab.qc: named
        "No queue is scoped to site sfx yet: check the spelling.",
        "No queue is scoped to platform ont yet: check the spelling."]
    stored = PersonProfile.objects.get(user=users["worker_human"])
    assert stored.site_scope == ["sfx", "bos"]  # saved as typed: a queue may name it later


def test_values_confirmed_once_are_not_asked_again(client, users):
    make_queue("q1", required_worker_capabilities=["wetlab.qc"], site_scope=["sfo"])
    PersonProfile.objects.create(user=users["worker_human"], capabilities=["wetlab.qc"],
                                 site_scope=["sfo", "lab9"], max_concurrent_leases=2)
    client = signed_in(client, users["admin"])
    fields = _page_form(client, "sci", max_concurrent_leases="4", reason="more at once")
    assert client.post("/people/sci/", fields).status_code == 302
    assert PersonProfile.objects.get(user=users["worker_human"]).max_concurrent_leases == 4
    # a new one is asked about, the old one not named again
    fields = _page_form(client, "sci", site_scope="sfo, lab9, lab7", reason="also lab 7")
    refused = client.post("/people/sci/", fields)
    assert refused.status_code == 400
    assert refused.context["form"].errors["site_scope"][0].startswith(
        "No queue is scoped to site lab7 yet:")


def test_an_unnamed_value_is_asked_with_every_other_problem_at_once(client, users):
    client = signed_in(client, users["admin"])
    fields = _page_form(client, "sci", capabilities="wetlab.qcc", reason="")
    fields.pop("use_default", None)
    before = _written()
    refused = client.post("/people/sci/", fields)
    assert refused.status_code == 400 and _written() == before
    assert {"reason", "capabilities", "keep_unnamed"} <= set(refused.context["form"].errors)


def test_saving_an_unchanged_page_records_nothing(client, users):
    client = signed_in(client, users["admin"])
    fields = _page_form(client, "op", reason="just looking")
    response = client.post("/people/op/", fields, follow=True)
    assert "Nothing changed" in response.content.decode()
    assert ProfileChange.objects.count() == 0 and PersonProfile.objects.count() == 0


# ------------------------------------------------------------------------------ refusals


REFUSED = [
    ({"reason": ""}, "reason"),
    ({"reason": "   "}, "needs a reason"),
    ({"reason": "bad\x00byte"}, "reason"),
    ({"capabilities": "wetlab.qc; drop table"}, "not a valid value"),
    ({"capabilities": ",".join(f"c{i}" for i in range(101))}, "At most 100"),
    ({"site_scope": "s f o"}, "not a valid value"),
    # "any" would be a site called any, and the person handed nothing
    ({"site_scope": "Any"}, "Leave it empty for any site"),
    ({"assay_scope": "wgs, all"}, "Leave it empty for any assay"),
    # one of two spellings matches no item: the person was handed half their work
    ({"site_scope": "sfo, SFO"}, "&#x27;sfo&#x27; and &#x27;SFO&#x27; differ only in case"),
    ({"capabilities": "wetlab.QC, wetlab.qc"}, "differ only in case"),
    ({"max_concurrent_leases": "0"}, "max_concurrent_leases"),
    ({"max_concurrent_leases": "1001"}, "max_concurrent_leases"),
    ({"max_concurrent_leases": "many"}, "max_concurrent_leases"),
    ({"max_concurrent_leases": ""}, "Give a lease limit"),
    ({"roles": ["superhero"]}, "roles"),
    ({"seen_change": "-1"}, "seen_change"),
    # edited values while the lab-wide default stays ticked: not silently dropped
    ({"use_default": "on"}, "differ from the lab-wide default"),
]


@pytest.mark.parametrize(("overrides", "said"), REFUSED)
def test_a_refused_change_says_why_and_writes_nothing(client, users, overrides, said):
    client = signed_in(client, users["admin"])
    fields = _page_form(client, "sci", capabilities="compute.qc", reason="why not")
    fields.pop("use_default", None)
    fields.update(overrides)
    before = _written()
    response = client.post("/people/sci/", fields)
    assert response.status_code == 400
    html = response.content.decode()
    assert said in html or said in str(response.context["form"].errors)
    assert _written() == before
    assert 'id="person-refused"' in html and 'id="token-refused"' not in html


def test_every_problem_of_a_change_is_said_at_once(client, users):
    """A forgotten reason and a mistyped capability and site took three tries to learn."""
    client = signed_in(client, users["admin"])
    fields = _page_form(client, "sci", capabilities="wetlab qc", site_scope="s f o",
                        reason="")
    fields.pop("use_default", None)
    before = _written()
    response = client.post("/people/sci/", fields)
    errors = response.context["form"].errors
    assert response.status_code == 400
    assert sorted(errors) == ["capabilities", "reason", "site_scope"], errors
    assert "'wetlab qc' is not a valid value" in errors["capabilities"][0]
    assert "needs a reason" in errors["reason"][0]
    assert _written() == before


def test_an_admin_may_not_lock_themselves_out(client, users):
    client = signed_in(client, users["admin"])
    before = _written()
    for overrides in ({"roles": ["operator"]}, {"is_active": ""}):
        fields = _page_form(client, "adm", reason="oops", **overrides)
        if overrides.get("is_active") == "":
            fields.pop("is_active")
        response = client.post("/people/adm/", fields)
        assert response.status_code == 400
        assert "your own admin role" in response.content.decode()
    assert _written() == before


def test_taking_admin_from_a_superuser_takes_it_and_the_record_says_so(client, users):
    """A superuser (the README's first admin) showed no role ticked; saving another role
    recorded "roles: none -> worker_human" and left them an admin."""
    from bloomops.accounts.roles import roles_of

    root = User.objects.create_superuser("root", password="pw-root-superuser-1")
    client = signed_in(client, users["admin"])
    page = client.get("/people/root/")
    assert page.context["form"].initial["roles"] == ["admin"]
    response = client.post("/people/root/", _page_form(client, "root", roles=["worker_human"],
                                                      reason="demote"))
    assert response.status_code == 302
    root.refresh_from_db()
    assert not root.is_superuser and roles_of(root) == {"worker_human"}
    change = ProfileChange.objects.filter(username="root").first()
    assert (change.before["roles"], change.after["roles"]) == (["admin"], ["worker_human"])


def test_two_admins_editing_one_person_the_second_is_refused(client, users):
    other = User.objects.create_user("adm2")
    other.groups.add(Group.objects.get(name="admin"))
    first = signed_in(client, users["admin"])
    mine = _page_form(first, "sci", max_concurrent_leases="2", reason="fewer items")
    from django.test import Client

    second = signed_in(Client(), other)
    theirs = _page_form(second, "sci", max_concurrent_leases="8", reason="more items")
    mine.pop("use_default", None)
    theirs.pop("use_default", None)
    assert first.post("/people/sci/", mine).status_code == 302
    before = _written()
    response = second.post("/people/sci/", theirs)
    assert response.status_code == 409 and "reload" in response.content.decode()
    assert _written() == before
    assert PersonProfile.objects.get(user=users["worker_human"]).max_concurrent_leases == 2


def test_an_unknown_person_is_404_and_nothing_is_written(client, users):
    client = signed_in(client, users["admin"])
    before = _written()
    assert client.get("/people/nobody-here/").status_code == 404
    assert client.post("/people/nobody-here/", {"reason": "x"}).status_code == 404
    assert _written() == before


# ------------------------------------------------------------ profile -> the person's worker


def test_a_persons_worker_takes_their_profile_not_the_lab_default(tenant, users, settings):
    settings.BLOOMOPS_HUMAN_CAPABILITIES = ["wetlab.extraction"]
    make_queue("compute", required_worker_capabilities=["compute.qc"])
    make_subject("compute")
    sci = actor("worker_human", username="sci")
    # without a profile: the lab-wide default
    worker = services.ensure_my_worker(users["worker_human"])
    props = load(euid=worker, tenant=tenant).props
    assert props["capabilities"] == ["wetlab.extraction"] and props["max_concurrent_leases"] == 5
    with pytest.raises(ActionError) as refused:
        act("claim_queue_item", sci, worker_euid=worker, queue_key="compute")
    assert refused.value.code == "WORKER_NOT_ELIGIBLE"
    # an admin gives them a profile: the worker takes it the next time they act
    PersonProfile.objects.create(user=users["worker_human"], capabilities=["compute.qc"],
                                 assay_scope=["wgs"], max_concurrent_leases=1)
    services.heartbeat(users["worker_human"], worker)
    props = load(euid=worker, tenant=tenant).props
    assert props["capabilities"] == ["compute.qc"] and props["assay_scope"] == ["wgs"]
    assert props["max_concurrent_leases"] == 1
    # the liveness window stays lab-wide: as long as a session may stay idle
    assert props["heartbeat_ttl_seconds"] == settings.SESSION_IDLE_SECONDS
    act("claim_queue_item", sci, worker_euid=worker, queue_key="compute")
    # the lab default no longer reaches a person with a profile of their own
    settings.BLOOMOPS_HUMAN_PROFILES = {"*": {"capabilities": ["other"]}}
    services.heartbeat(users["worker_human"], worker)
    assert load(euid=worker, tenant=tenant).props["capabilities"] == ["compute.qc"]


# --------------------------------------------------------- the change record is append-only


def test_as_the_runtime_role_admins_change_people_but_nobody_rewrites_the_record(
        runtime, committed, client):  # noqa: F811  (the fixture imported above)
    from psycopg2 import errors

    admin = User.objects.create_user("boss")
    admin.groups.add(Group.objects.get(name="admin"))
    sci = User.objects.create_user("bench")
    sci.groups.add(Group.objects.get(name="worker_human"))
    with django_as(runtime):
        client = signed_in(client, admin)
        fields = _page_form(client, "bench", max_concurrent_leases="2", reason="training")
        fields.pop("use_default", None)
        assert client.post("/people/bench/", fields).status_code == 302
    assert ProfileChange.objects.filter(username="bench", changed_by="boss").count() == 1
    with raw_runtime_connection(runtime) as conn, conn.cursor() as cur:
        for statement in ("UPDATE accounts_profilechange SET reason = 'forged'",
                          "DELETE FROM accounts_profilechange"):
            with pytest.raises(errors.InsufficientPrivilege):
                cur.execute(statement)
            conn.rollback()
    assert ProfileChange.objects.get(username="bench").reason == "training"


# ------------------------------------------------------------------------- new people


def test_an_admin_adds_a_person_who_can_then_sign_in(client, users):
    admin = signed_in(client, users["admin"])
    response = admin.post("/people/", {"username": "newbie", "first_name": "New",
                                       "last_name": "Bie", "password": "a-long-password-1",
                                       "roles": ["worker_human"], "reason": "joined the lab"})
    assert response.status_code == 302 and response["Location"] == "/people/newbie/"
    newbie = User.objects.get(username="newbie")
    assert _roles(newbie) == ["worker_human"] and newbie.is_active
    change = ProfileChange.objects.get(username="newbie")
    assert change.before == {} and change.after["roles"] == ["worker_human"]
    assert change.changed_by == "adm" and change.reason == "joined the lab"
    from django.test import Client

    signin = Client().post("/accounts/login/", {"username": "newbie",
                                                "password": "a-long-password-1"})
    # a person at the bench lands on their work (a supervisor on the dashboard)
    assert signin.status_code == 302 and signin["Location"] == "/my-work/"


def test_a_person_added_without_a_role_is_told_to_ask_for_one(client, users):
    """An account with no role signs in to a 403 page: the admin is told so when adding it,
    and the page says what to do instead of leading "back to the queues", which is the same
    403 again."""
    from django.contrib.messages import get_messages
    from django.test import Client

    admin = signed_in(client, users["admin"])
    response = admin.post("/people/", {"username": "tech3", "password": "a-long-password-1",
                                       "reason": "new starter"})
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "tech3 may now sign in, but sees nothing until you give them a role below."]
    person = Client()
    person.post("/accounts/login/", {"username": "tech3", "password": "a-long-password-1"})
    person.post("/accounts/password/", {"old_password": "a-long-password-1",
                                        "new_password1": "Glacier-Copper-58",
                                        "new_password2": "Glacier-Copper-58"})
    page = person.get("/")
    html = page.content.decode()
    assert page.status_code == 403 and "ask an admin to give you one" in html
    assert "Back to the queues" not in html
    # nor any other way round to the same 403: no navigation, no lookup; signing out stays
    assert 'aria-label="Main"' not in html and 'id="lookup-euid"' not in html
    assert "Sign out" in html
    # their page says a profile works only at the bench
    person_page = admin.get("/people/tech3/").content.decode()
    assert 'id="not-at-bench"' in person_page
    assert 'id="not-at-bench"' not in admin.get("/people/sci/").content.decode()


def test_an_admins_page_says_their_profile_works_though_no_roster_counts_on_them(client,
                                                                                 users):
    """An admin's page said their profile "takes effect only once they have" worker_human:
    an admin claimed with it all the same."""
    admin = signed_in(client, users["admin"])
    page = admin.get(f"/people/{users['admin'].username}/").content.decode()
    assert 'id="not-at-bench"' not in page
    said = page.split('id="admin-at-bench">')[1].split("</p>")[0]
    assert "they may claim work with this profile" in said and "roster" in said
    assert 'id="admin-at-bench"' not in admin.get("/people/sci/").content.decode()


NEW_REFUSED = [
    ({"username": "sci"}, "already exists"),
    ({"username": "no spaces!"}, "username"),
    ({"username": ""}, "username"),
    ({"password": "short"}, "too short"),
    # the password signs approvals: no guessable ones
    ({"password": "password123"}, "too common"),
    ({"password": "8402917365"}, "entirely numeric"),
    ({"username": "mariacurie", "password": "mariacurie1"}, "too similar to the username"),
    ({"username": "jdoe", "password": "jdoe2026!xq"}, "contains the username"),
    ({"password": "bloomops"}, "demo"),
    ({"reason": ""}, "needs a reason"),
    ({"roles": ["root"]}, "roles"),
    ({"username": "nul\x00name"}, "username"),
    # the signer of an approval must not read as someone else (a second account of one
    # admin, named like a colleague)
    ({"username": "SCI"}, "already exists (sci)"),
    ({"username": "sc\u0456"}, "another script"),  # Cyrillic і
    ({"username": "ｓｃｉ"}, "already exists"),  # full-width letters: read as sci
    # a signature prints the name: a terminal escape or a right-to-left override in it
    ({"first_name": "\x1b[31mred\u202e"}, "printable characters"),
    ({"last_name": "Lindqvist\u200b"}, "printable characters"),
]


@pytest.mark.parametrize(("overrides", "said"), NEW_REFUSED)
def test_a_refused_new_person_says_why_and_writes_nothing(client, users, overrides, said):
    admin = signed_in(client, users["admin"])
    before = _written()
    response = admin.post("/people/", {"username": "newbie", "password": "a-long-password-1",
                                       "roles": ["worker_human"], "reason": "joined",
                                       **overrides})
    assert response.status_code == 400
    assert said in response.content.decode() or said in str(response.context["new"].errors)
    assert _written() == before
    # said at the top too (the form is at the foot of the list), and the page opens at the
    # first field to fix
    html = response.content.decode()
    assert 'id="new-person-refused"' in html
    fields = response.context["new"].errors.keys() - {"__all__"}
    assert html.count(" autofocus") == (1 if fields and fields != {"roles"} else 0)


def test_only_admins_add_people(client, users):
    before = _written()
    for role in ("worker_service", "worker_human", "operator"):
        response = signed_in(client, users[role]).post(
            "/people/", {"username": "sneaky", "password": "a-long-password-1",
                         "roles": ["admin"], "reason": "me"})
        assert response.status_code == 403
    assert _written() == before and not User.objects.filter(username="sneaky").exists()


def test_a_revoked_capability_allows_no_further_claim(tenant, users):
    """A claim judges the person's profile as it is now, not as their worker last stored it."""
    make_queue("compute", required_worker_capabilities=["compute.qc"])
    make_subject("compute")
    make_subject("compute")
    sci = actor("worker_human", username="sci")
    profile = PersonProfile.objects.create(user=users["worker_human"],
                                           capabilities=["compute.qc"])
    worker = services.ensure_my_worker(users["worker_human"])
    act("claim_queue_item", sci, worker_euid=worker, queue_key="compute")
    profile.capabilities = ["wetlab.extraction"]
    profile.save()
    with pytest.raises(ActionError) as refused:  # no heartbeat in between
        act("claim_queue_item", sci, worker_euid=worker, queue_key="compute")
    assert refused.value.code == "WORKER_NOT_ELIGIBLE"


@pytest.mark.parametrize(("configured", "said"), [
    ({"role:worker_human": {"capabilitiez": ["wetlab.qc"]}}, "no field 'capabilitiez'"),
    ({"role:scientist": {"capabilities": ["wetlab.qc"]}}, "'role:scientist' is not"),
    ({"*": {"capabilities": "wetlab.qc"}}, "capabilities must be a list of texts"),
    ({"*": {"max_concurrent_leases": "5"}}, "max_concurrent_leases must be a positive"),
    ({"*": ["wetlab.qc"]}, "must be an object"),
    (["wetlab.qc"], "must be a JSON object"),
])
def test_a_lab_default_profile_nobody_would_get_stops_the_start(settings, configured, said):
    """A misspelt field or role in BLOOMOPS_HUMAN_PROFILES passed `check` and was silently
    ignored: the lab believed its scientists had capabilities they did not."""
    from django.core.exceptions import ImproperlyConfigured

    from bloomops.execution.people import check_settings

    settings.BLOOMOPS_HUMAN_PROFILES = configured
    with pytest.raises(ImproperlyConfigured, match=re.escape(said)):
        check_settings()
    settings.BLOOMOPS_HUMAN_PROFILES = {"*": {"max_concurrent_leases": 3},
                                        "role:worker_human": {"capabilities": ["wetlab.qc"]},
                                        "user:ann": {"site_scope": ["sfo"]}}
    check_settings()


def test_no_two_usernames_differ_only_in_case_even_at_the_same_instant(db):
    """The check before an insert let three of eight simultaneous "ra-case", "RA-CASE"...
    through: the database now holds the rule itself."""
    from django.db import IntegrityError, transaction

    User.objects.create_user("ra-case")
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.create_user("RA-Case")
    assert list(User.objects.filter(username__iexact="ra-case").values_list(
        "username", flat=True)) == ["ra-case"]


def test_letting_a_person_back_in_brings_back_nothing_issued_before(client, users):
    """Clearing "may sign in" refused qa's token and browser session while it stayed
    cleared; ticking it again made both work again."""
    from django.test import Client

    from bloomops.accounts.tokens import create_token
    from tests.api_helpers import Api
    from tests.engine import GIVEN

    _, token = create_token("op", **GIVEN)
    their_browser = signed_in(Client(), users["operator"])
    assert their_browser.get("/").status_code == 200
    admin = signed_in(client, users["admin"])
    for active in ("", "on"):
        fields = _page_form(admin, "op", reason="left / came back")
        fields.pop("is_active", None)
        if active:
            fields["is_active"] = active
        assert admin.post("/people/op/", fields).status_code == 302
    assert their_browser.get("/").status_code == 302  # to sign in
    assert Api(token).get("/queues").status_code == 401
    assert signed_in(Client(), users["operator"]).get("/").status_code == 200  # signs in anew


def test_an_admin_gives_a_person_a_new_password_and_a_person_changes_their_own(client, users):
    """A mistyped first password or a forgotten one had no way out in the console."""
    from django.test import Client

    from bloomops.accounts.tokens import create_token
    from tests.api_helpers import Api
    from tests.engine import GIVEN

    their_old_session = signed_in(Client(), users["operator"])
    _, token = create_token("op", **GIVEN)
    admin = signed_in(client, users["admin"])
    before = _written()
    refused = admin.post("/people/op/password/", {"password": "short", "reason": "forgot"})
    assert refused.status_code == 302 and _written() == before
    assert "too short" in " ".join(m.message for m in get_messages(refused.wsgi_request))
    done = admin.post("/people/op/password/", {"password": "Cobalt-Lantern-42",
                                              "reason": "forgot it"})
    assert done.status_code == 302
    change = ProfileChange.objects.filter(username="op").first()
    assert (change.changed_by, change.reason, change.changed_fields()) == (
        "adm", "forgot it", ["password"])
    assert "Cobalt" not in str(change.before) + str(change.after)
    assert their_old_session.get("/").status_code == 302  # signed out
    assert Api(token).get("/queues").status_code == 401  # and their API token revoked
    person = Client()
    assert person.post("/accounts/login/", {"username": "op",
                                            "password": "Cobalt-Lantern-42"}).status_code == 302
    # their own change asks for the current one
    wrong = person.post("/accounts/password/", {"old_password": "nope",
                                                "new_password1": "Amber-Harbour-77",
                                                "new_password2": "Amber-Harbour-77"})
    assert wrong.status_code == 200 and "does not match" in wrong.content.decode()
    ok = person.post("/accounts/password/", {"old_password": "Cobalt-Lantern-42",
                                             "new_password1": "Amber-Harbour-77",
                                             "new_password2": "Amber-Harbour-77"})
    assert ok.status_code == 302 and person.get("/").status_code == 200
    # only admins set another's; nobody sets their own without the current one here
    assert signed_in(Client(), users["worker_human"]).post(
        "/people/op/password/", {"password": "x", "reason": "y"}).status_code == 403
    self_set = admin.post("/people/adm/password/", {"password": "Cobalt-Lantern-43",
                                                    "reason": "mine"})
    assert "your own page" in " ".join(m.message for m in get_messages(self_set.wsgi_request))


def test_a_change_reads_in_the_page_s_words(client, users):
    """The record read "platform_scope: – → none" for a scope that admits any platform, the
    message raw field names, and taking sign-in away "changed: is_active"."""
    client = signed_in(client, users["admin"])
    fields = _page_form(client, "sci", reason="own profile", use_default="",
                        capabilities="wetlab.qc", max_concurrent_leases="2")
    done = client.post("/people/sci/", fields)
    said = " ".join(m.message for m in get_messages(done.wsgi_request))
    assert "sci changed: assays, capabilities, lease limit, own profile, platforms, sites." in said
    html = client.get("/people/sci/").content.decode()
    history = html.split('id="person-history"')[1]
    assert "<code>platform_scope</code>: lab default → any" in history and "→ none" not in history
    fields = _page_form(client, "sci", reason="left")
    fields.pop("is_active", None)
    gone = client.post("/people/sci/", fields)
    assert "sci can no longer sign in: their sessions ended and their API tokens were" \
        " revoked." in " ".join(m.message for m in get_messages(gone.wsgi_request))


def test_a_person_is_asked_to_change_the_password_an_admin_gave_them(client, users):
    """Until they do, the admin knows what they sign with (RULES.md#approvals)."""
    from django.test import Client

    from bloomops.accounts.profiles import add_person

    add_person("newbie", first_name="", last_name="", password="Correct-Horse-Battery-9",
               roles=["operator"], reason="new starter", admin_username="adm")
    person = Client()
    signed = person.post("/accounts/login/", {"username": "newbie",
                                              "password": "Correct-Horse-Battery-9"})
    assert signed.status_code == 302
    assert "Your password was given to you by adm" in person.get("/", follow=True
                                                                 ).content.decode()
    person.post("/accounts/password/", {"old_password": "Correct-Horse-Battery-9",
                                        "new_password1": "Glacier-Copper-58",
                                        "new_password2": "Glacier-Copper-58"})
    # changed: no longer asked to, but told how long the link to adm lasts
    page = person.get("/").content.decode()
    assert "Your password was given to you" not in page
    assert "You changed the password adm gave you only lately" in page
    from datetime import timedelta

    from django.conf import settings
    from django.db.models import F

    from bloomops.accounts.models import ProfileChange

    window = timedelta(seconds=settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 1)
    ProfileChange.objects.filter(username="newbie").update(changed_at=F("changed_at") - window)
    assert 'id="password-given"' not in person.get("/").content.decode()


def test_the_lately_changed_password_is_said_to_deciders_alone_and_in_plain_words(client,
                                                                                    users):
    """A bench scientist read on every page for a day that they "decide no approval", which
    they never may, "until in 23 h 59 min (28 Nov, 12:58 UTC)"."""
    from django.test import Client

    from bloomops.accounts.profiles import add_person

    for username, role in (("bench1", "worker_human"), ("qa1", "operator")):
        add_person(username, first_name="", last_name="", password="Correct-Horse-Battery-9",
                   roles=[role], reason="new starter", admin_username="adm")
    pages = {}
    for username in ("bench1", "qa1"):
        person = Client()
        person.post("/accounts/login/", {"username": username,
                                         "password": "Correct-Horse-Battery-9"})
        person.post("/accounts/password/", {"old_password": "Correct-Horse-Battery-9",
                                            "new_password1": "Glacier-Copper-58",
                                            "new_password2": "Glacier-Copper-58"})
        pages[username] = person.get("/", follow=True).content.decode()
    assert 'id="password-given"' not in pages["bench1"]
    said = pages["qa1"].split('id="password-given">')[1].split("</p>")[0]
    assert "only lately" in said and "until in " not in said
    assert re.search(r"until <time [^>]*><span class=\"local\">[^<]+</span></time>, you and adm",
                     said), said


@pytest.mark.parametrize("change", [{"roles": ["operator"]}, {"is_active": ""}])
def test_taking_a_person_from_the_bench_says_what_they_still_hold(client, users, change):
    """An admin took a scientist's worker_human role (or sign-in) away and was not told the
    two items they had claimed stay claimed: a supervisor saw them taken by nobody at work."""
    make_queue("q1")
    for name in ("A", "B"):
        subject = make_subject("q1", name=name)
        worker = services.ensure_my_worker(users["worker_human"])
        act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
            subject_euid=subject, queue_key="q1")
    client = signed_in(client, users["admin"])
    fields = _page_form(client, "sci", reason="moved to the office", **change)
    if change.get("is_active") == "":
        fields.pop("is_active")
    response = client.post("/people/sci/", fields, follow=True)
    told = [str(m) for m in get_messages(response.wsgi_request)] or [
        response.content.decode()]
    assert any("sci still holds 2 claimed items" in m and worker in m for m in told), told
    # a change that keeps them at the bench says nothing of the kind
    fields = _page_form(client, "op", reason="promote", roles=["operator", "worker_human"])
    page = client.post("/people/op/", fields, follow=True).content.decode()
    assert "still holds" not in page


def test_every_field_s_described_by_names_its_help_on_the_page(client, users):
    """The person and token forms pointed screen readers at help texts by ids no element
    had (id_capabilities_helptext, token-name_helptext): the help was never read out."""
    client.force_login(users["admin"])
    for path in ("/people/", "/people/sci/", "/accounts/password/", "/intake/", "/scan/",
                 "/workbench/", "/failures/", "/holds/", "/activity/", "/results/", "/admin/"):
        html = client.get(path).content.decode()
        described = set(re.findall(r'aria-describedby="([^"]+)"', html))
        assert described or path not in ("/people/", "/people/sci/"), path
        missing = {i for ids in described for i in ids.split()
                   if f'id="{i}"' not in html}
        assert missing == set(), path
