"""Who can serve a queue (docs/RULES.md#metrics): the people and service workers rostered for
it (configured and able, online or not), those online now, and their free lease slots. The
dashboard, the API's queue summaries and /metrics read the same overview."""

from __future__ import annotations

import re

from django.contrib.auth.models import User

from bloomops.accounts.models import PersonProfile
from bloomops.execution import clock, selectors
from bloomops.web import services
from tests.api_helpers import api_for
from tests.conftest import make_user
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register
from tests.test_metrics_endpoint import scrape
from tests.web_support import signed_in


def _row(html: str, queue_key: str) -> str:
    row = html[html.index(f'data-queue="{queue_key}"'):]
    return row[:row.index("</tr>")]


def _text(html: str) -> str:
    """What a reader sees of the markup."""
    return re.sub(r"<[^>]+>", "", html)


def test_rostered_people_count_before_they_sign_in(client, tenant, users):
    make_queue("qc", required_worker_capabilities=["wetlab.qc"])
    make_queue("seq", required_worker_capabilities=["wetlab.sequencing"], site_scope=["bos"])
    make_queue("exotic", required_worker_capabilities=["nobody.has.this"])
    # sci and a second scientist: neither has ever signed in or clicked anything
    PersonProfile.objects.create(user=users["worker_human"], capabilities=["wetlab.qc"])
    ann = make_user("ann", "worker_human")
    ann.first_name, ann.last_name = "Ann", "Lee"
    ann.save()
    PersonProfile.objects.create(user=ann, capabilities=["wetlab.qc", "wetlab.sequencing"],
                                 site_scope=["sfo"])
    # people who do not count: no longer allowed to sign in, or not a bench worker
    gone = make_user("gone", "worker_human")
    gone.is_active = False
    gone.save()
    PersonProfile.objects.create(user=users["operator"], capabilities=["wetlab.qc"])
    cover = selectors.overview().coverage
    assert cover["qc"].rostered == ["Ann Lee", "sci"] and cover["qc"].online == []
    assert cover["qc"].state == "offline"
    assert cover["seq"].rostered == [] and cover["seq"].state == "nobody"  # ann: wrong site
    assert cover["exotic"].state == "nobody"
    html = signed_in(client, users["operator"]).get("/").content.decode()
    assert "0 online of 2 rostered" in _row(html, "qc") and "nobody online" in _row(html, "qc")
    assert "nobody can serve" in _row(html, "seq") and "nobody can serve" in _row(html, "exotic")


def test_a_person_counts_once_and_online_once_they_act(client, tenant, users):
    make_queue("qc", required_worker_capabilities=["wetlab.qc"])
    PersonProfile.objects.create(user=users["worker_human"], capabilities=["wetlab.qc"],
                                 max_concurrent_leases=2)
    services.ensure_my_worker(users["worker_human"])
    cover = selectors.overview().coverage["qc"]
    assert cover.rostered == ["sci"] and cover.online == ["sci"] and cover.free_slots == 2
    html = signed_in(client, users["operator"]).get("/").content.decode()
    assert "1 online of 1 rostered, 2 free slots" in _text(_row(html, "qc"))
    # an hour of silence: offline, still rostered
    clock.advance(3601)
    cover = selectors.overview().coverage["qc"]
    assert cover.rostered == ["sci"] and cover.online == [] and cover.state == "offline"


def test_a_disabled_persons_worker_and_a_lost_capability_leave_the_roster(tenant, users):
    make_queue("qc", required_worker_capabilities=["wetlab.qc"])
    profile = PersonProfile.objects.create(user=users["worker_human"],
                                           capabilities=["wetlab.qc"])
    worker = services.ensure_my_worker(users["worker_human"])
    # the profile as it is now counts, before the person acts again
    profile.capabilities = ["wetlab.extraction"]
    profile.save()
    cover = selectors.overview().coverage["qc"]
    assert cover.rostered == ["sci"] and cover.online == ["sci"]  # the worker still may, now
    services.heartbeat(users["worker_human"], worker)
    assert selectors.overview().coverage["qc"].state == "nobody"
    profile.capabilities = ["wetlab.qc"]
    profile.save()
    act("set_worker_status", actor("admin", username="adm"), worker_euid=worker,
        payload={"operation": "disable", "reason": "on leave"})
    assert selectors.overview().coverage["qc"].state == "nobody"


def test_offline_service_workers_stay_rostered(tenant, users):
    make_queue("q1", required_worker_capabilities=["compute.qc"])
    User.objects.filter(username="sci").delete()  # only the service worker can serve it
    svc = actor(*SERVICE)
    register(svc, "svc-a", display_name="Aligner", capabilities=["compute.qc"],
             heartbeat_ttl_seconds=60)
    assert selectors.overview().coverage["q1"].online == ["Aligner"]
    clock.advance(120)
    cover = selectors.overview().coverage["q1"]
    assert cover.rostered == ["Aligner"] and cover.online == [] and cover.state == "offline"


def test_a_queue_whose_only_capable_workers_are_all_busy_is_flagged(client, tenant, users):
    make_queue("q1", required_worker_capabilities=["compute.qc"])
    make_queue("q2", required_worker_capabilities=["compute.qc"])
    User.objects.filter(username="sci").delete()
    for name in ("a", "b"):
        make_subject("q1", name=name)
    svc = actor(*SERVICE)
    worker = register(svc, "svc-a", display_name="Aligner", capabilities=["compute.qc"],
                      max_concurrent_leases=1)
    assert selectors.overview().coverage["q1"].state == "ok"
    claim(svc, worker, "q1")  # busy on q1 at its limit: q2 has nobody free either
    ov = selectors.overview()
    for key in ("q1", "q2"):
        assert ov.coverage[key].online == ["Aligner"] and ov.coverage[key].free_slots == 0
        assert ov.coverage[key].state == "busy"
    html = signed_in(client, users["operator"]).get("/").content.decode()
    assert "all busy" in _row(html, "q2") and 'class=" uncovered"' in html
    # the API and /metrics say what the dashboard shows
    rows = {q["queue_key"]: q for q in api_for(users["operator"]).get("/queues").json()}
    metrics = scrape()
    for key in ("q1", "q2"):
        assert rows[key]["worker_online_count"] == metrics[("worker_online_count", key)] == 1
        assert rows[key]["worker_rostered_count"] == metrics[("worker_rostered_count", key)] == 1
        assert rows[key]["worker_free_slots"] == metrics[("worker_free_slots", key)] == 0
    assert metrics[("worker_rostered_count", "__all__")] == 1  # one worker, not one per queue
    # a second worker with room: q2 is covered again
    register(svc, "svc-b", display_name="Backup", capabilities=["compute.qc"])
    assert selectors.overview().coverage["q2"].state == "ok"
    metrics = scrape()
    assert metrics[("worker_free_slots", "q2")] == 1 and metrics[("worker_rostered_count",
                                                                  "q2")] == 2
    assert metrics[("worker_free_slots", "__all__")] == 1


def test_the_queue_page_names_who_is_rostered_and_who_is_online(client, tenant, users):
    """The dashboard's "1 online of 2 rostered" named people only in a tooltip, which a
    tablet never shows and which stopped at twenty: a supervisor could not learn who."""
    make_queue("qc", required_worker_capabilities=["wetlab.qc"])
    PersonProfile.objects.create(user=users["worker_human"], capabilities=["wetlab.qc"])
    ann = make_user("ann", "worker_human")
    ann.first_name, ann.last_name = "Ann", "Lee"
    ann.save()
    PersonProfile.objects.create(user=ann, capabilities=["wetlab.qc"])
    services.ensure_my_worker(users["worker_human"])  # sci acts: online
    supervisor = signed_in(client, users["operator"])
    dashboard = supervisor.get("/").content.decode()
    # the free slots inside the link (after it, a tablet's line began with their comma)
    assert ('href="/queues/qc/#queue-coverage">1 online of 2 rostered, 5 free slots</a>'
            in _row(dashboard, "qc"))
    page = supervisor.get("/queues/qc/").content.decode()
    panel = page[page.index('id="queue-coverage"'):page.index("</details>")]
    assert "1 online of 2 rostered" in panel
    assert "<li>Ann Lee</li>" in panel
    assert '<li>sci <span class="badge ok">online</span></li>' in panel
