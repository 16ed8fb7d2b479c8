"""A service account's profile bounds its workers (docs/RULES.md#service-workers): an admin
who gives a worker_service account a profile on /people/ decides what every SERVICE or
INSTRUMENT_ADAPTER worker it registers may do. A token of that account had registered
workers with any capabilities, scopes and lease limit, so the profile on the page bound
nothing. A refusal writes nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from bloomops.accounts.models import PersonProfile
from bloomops.execution.errors import ActionError
from tests.api_helpers import api_for, error_code
from tests.engine import (
    SERVICE,
    actor,
    claim,
    counts,
    make_queue,
    make_subject,
    props,
    register,
)
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db


def _bound(username: str = "worker_service", **fields) -> PersonProfile:
    fields.setdefault("capabilities", ["wetlab.extraction"])
    fields.setdefault("site_scope", ["sfo"])
    fields.setdefault("max_concurrent_leases", 3)
    user = User.objects.get(username=username)
    return PersonProfile.objects.update_or_create(user=user, defaults=fields)[0]


def _refused(who, **payload) -> ActionError:
    before = counts()
    with pytest.raises(ActionError) as err:
        register(who, **payload)
    assert err.value.code == "OUTSIDE_PROFILE" and err.value.http_status == 403
    assert counts() == before
    return err.value


@pytest.mark.parametrize(("payload", "field", "said"), [
    ({"capabilities": ["wetlab.extraction", "compute.qc"], "site_scope": ["sfo"]},
     "capabilities", "capabilities compute.qc"),
    ({"capabilities": [], "site_scope": []}, "site_scope", "every site (an empty site_scope)"),
    ({"capabilities": [], "site_scope": ["sfo", "bos"]}, "site_scope", "site bos"),
    ({"capabilities": [], "site_scope": ["sfo"], "max_concurrent_leases": 4},
     "max_concurrent_leases", "a lease limit of 4"),
])
def test_a_worker_asking_past_its_accounts_profile_is_refused(tenant, payload, field, said):
    svc = actor(*SERVICE)
    _bound()
    err = _refused(svc, **payload)
    assert err.details["field"] == field and said in err.message
    # the refusal says what the profile allows, so the service's owner can fix its config
    assert "capabilities wetlab.extraction; sites sfo; at most 3 leases" in err.message


def test_what_a_worker_leaves_out_it_takes_from_the_profile(tenant):
    svc = actor(*SERVICE)
    _bound(platform_scope=["novaseq"])
    worker = props(register(svc, capabilities=None))
    assert worker["capabilities"] == ["wetlab.extraction"]
    assert worker["site_scope"] == ["sfo"] and worker["platform_scope"] == ["novaseq"]
    assert worker["assay_scope"] == [] and worker["max_concurrent_leases"] == 3


def test_within_the_profile_a_worker_registers_and_claims(tenant):
    svc = actor(*SERVICE)
    _bound(capabilities=["wetlab.extraction", "wetlab.qc"], site_scope=[])
    make_queue("q1", required_worker_capabilities=["wetlab.extraction"])
    make_subject("q1", props={"site": "bos"})
    worker = register(svc, capabilities=["wetlab.extraction"], site_scope=["bos"],
                      max_concurrent_leases=2)
    assert claim(svc, worker)["lease_euid"]


def test_a_narrowed_profile_stops_claims_until_the_worker_registers_within_it(tenant):
    svc = actor(*SERVICE)
    _bound(capabilities=["wetlab.extraction", "wetlab.qc"])
    make_queue("q1")
    make_subject("q1", props={"site": "sfo"})
    key = "lab://extractor-1"
    worker = register(svc, key, capabilities=["wetlab.extraction", "wetlab.qc"])
    _bound(capabilities=["wetlab.extraction"])  # the admin takes wetlab.qc away
    before = counts()
    with pytest.raises(ActionError) as err:
        claim(svc, worker)
    assert err.value.code == "OUTSIDE_PROFILE" and counts() == before
    assert "registered with capabilities wetlab.qc" in err.value.message
    assert "Register it again within the profile" in err.value.message
    # a worker starting again under its key with its new configuration is let back to work
    assert register(svc, key, capabilities=["wetlab.extraction"]) == worker
    assert claim(svc, worker)["lease_euid"]


def test_the_workers_page_flags_a_worker_its_narrowed_profile_no_longer_allows(
        tenant, client):
    """Its claims were refused with a message only the service's own log showed; the
    workers page said nothing of why a worker of the lab sat idle."""
    svc = actor(*SERVICE)
    _bound(capabilities=["wetlab.extraction", "wetlab.qc"], site_scope=["sfo"])
    stale = register(svc, "lab://extractor-1", capabilities=["wetlab.extraction", "wetlab.qc"])
    fine = register(svc, "lab://extractor-2", capabilities=["wetlab.extraction"])
    _bound(capabilities=["wetlab.extraction"], site_scope=["sfo"])  # wetlab.qc taken away
    actor("operator", username="sup")
    supervisor = signed_in(client, User.objects.get(username="sup"))
    page = supervisor.get("/workers/").content.decode()

    def row(euid: str) -> str:
        return page.split(f'data-worker="{euid}"')[1].split("</tr>")[0]

    assert "outside worker_service's profile" in row(stale)
    assert "registered with capabilities wetlab.qc" in row(stale)
    assert "outside" not in row(fine)
    # registered again within the profile, it is no longer flagged
    register(svc, "lab://extractor-1", capabilities=["wetlab.extraction"])
    assert "outside-profile" not in supervisor.get("/workers/").content.decode()


def test_re_registering_cannot_keep_what_the_profile_no_longer_allows(tenant):
    svc = actor(*SERVICE)
    key = "lab://extractor-2"
    register(svc, key, capabilities=["compute.qc"])  # before the account had a profile
    _bound()
    # sending nothing keeps what it was registered with, which is now past the profile
    err = _refused(svc, worker_key=key, capabilities=None)
    assert "capabilities compute.qc" in err.message


def test_accounts_without_a_profile_and_admins_are_bounded_by_their_role_alone(tenant):
    svc, adm = actor(*SERVICE), actor("admin", username="adm")
    _bound(username="adm")  # an admin's profile bounds their bench work, not what they set up
    assert props(register(svc, capabilities=["anything.at.all"]))["site_scope"] == []
    assert props(register(adm, capabilities=["anything.at.all"]))["capabilities"] == [
        "anything.at.all"]


def test_the_api_refuses_with_the_stable_code_and_writes_nothing(users):
    _bound(username="svc")
    api = api_for(users["worker_service"])
    before = counts()
    response = api.act("register-worker", worker_key="lab://robot",
                       capabilities=["wetlab.extraction"], site_scope=["sfo", "nyc"])
    assert response.status_code == 403 and error_code(response) == "OUTSIDE_PROFILE"
    assert response.json()["error"]["details"]["field"] == "site_scope"
    assert counts() == before


def test_the_person_page_says_what_a_service_accounts_profile_does(client, users):
    admin = signed_in(client, users["admin"])
    page = admin.get("/people/svc/").content.decode()
    assert "its workers may register any capabilities" in page
    _bound(username="svc")
    page = admin.get("/people/svc/").content.decode()
    assert "bounds every service or instrument worker svc registers" in page
    assert "no worker_human role" not in page


def test_saving_a_service_accounts_profile_says_what_its_workers_are_held_to(client, users):
    """Lowering a service account's lease limit said "Their worker takes the new profile the
    next time they act": its worker's next claim was refused OUTSIDE_PROFILE instead."""
    from django.contrib.messages import get_messages

    from tests.test_people import _page_form

    _bound(username="svc")
    admin = signed_in(client, users["admin"])
    done = admin.post("/people/svc/", _page_form(admin, "svc", max_concurrent_leases="2",
                                                   reason="robot 3 retired"))
    assert done.status_code == 302, done.content
    said = next(str(m) for m in get_messages(done.wsgi_request) if "changed" in str(m))
    assert said.startswith("svc changed: lease limit. Their service workers are held to it")
    assert "has its claims refused until it registers again within it" in said
    assert "takes the new profile" not in said


# For test_engine_refusals' list of every code: each refusal, one scenario apiece.
def s_outside_profile_register(svc, op):
    _bound(username=svc.username)
    return lambda: register(svc, capabilities=["compute.qc"])


def s_outside_profile_claim(svc, op):
    make_subject("q1", props={"site": "sfo"})
    worker = register(svc, capabilities=["compute.qc"])
    _bound(username=svc.username)
    return lambda: claim(svc, worker)


def test_the_people_list_shows_which_service_accounts_are_bounded(client, users):
    _bound(username="svc")
    make_user_unbounded = User.objects.create_user("svc-2")
    make_user_unbounded.groups.add(users["worker_service"].groups.get())
    html = signed_in(client, users["admin"]).get("/people/").content.decode()
    bounded = html.split('data-person="svc"')[1].split("</tr>")[0]
    assert "wetlab.extraction" in bounded and "site sfo" in bounded
    unbounded = html.split('data-person="svc-2"')[1].split("</tr>")[0]
    assert "without a profile of its own" in unbounded
