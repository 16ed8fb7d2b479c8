"""The operator UI screens (reads) — what each role sees on each page."""

from __future__ import annotations

import csv
import io
import re

import pytest

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts
from bloomops.execution.states import PRIORITY_CLASSES
from bloomops.web import services
from tests.engine import act, actor, envelope, make_queue, make_subject, register
from tests.web_support import form_for, has_form, signed_in

pytestmark = pytest.mark.django_db


def test_dashboard_lists_queues_in_dispatch_order_with_metrics(client, lab):
    make_queue("q0", display_name="Low", dispatch_priority=5)
    make_subject("q1", name="a")
    make_subject("q1", name="stat one", priority=PRIORITY_CLASSES["STAT"])
    clock.advance(2 * 3600 + 12 * 60)
    response = signed_in(client, lab["worker_human"]).get("/")
    html = response.content.decode()
    assert response.status_code == 200
    keys = [s.queue_key for s in response.context["summaries"]]
    assert keys == ["q1", "q2", "q0"]
    assert html.index('data-queue="q1"') < html.index('data-queue="q2"') < html.index(
        'data-queue="q0"')
    # "1 STAT"; on a tablet the column's heading says STAT and the badge the number
    assert '<span class="badge prio-stat">1<span class="opt"> STAT</span></span>' in html
    # ... leading to the queue, where STAT items come first
    stat = html.split('<td class="num stat">')[1].split("</td>")[0]
    assert '<a href="/queues/q1/" aria-label="1 STAT in Queue one: first in its order">' in stat
    assert "2 h 12 min" in html  # readable oldest age
    # q1's oldest item is older than its one-hour straggler threshold; q2 and q0 are empty
    def row_tag(key: str) -> str:
        start = html.index(f'<tr data-queue="{key}"')
        return html[start:html.index(">", start)]

    assert 'class="straggler' in row_tag("q1")
    assert "straggler" not in row_tag("q2") and "straggler" not in row_tag("q0")
    # its threshold said in words too, not only in a tooltip a finger or a keyboard never
    # reaches; so are the columns' counts (the key under the table)
    assert "straggler<span class=\"sr-only\"> (older than 1 h)</span></span>" in html
    key = html.split('class="table-key"')[1].split("</details>")[0]
    assert "counts twice, its dispatch and its result" in key and "not to be added" in key
    # nobody has registered a worker, but the bench scientist is rostered for every queue:
    # each is flagged as having nobody online, none as having nobody who can serve it
    assert html.count("nobody online") == 3 and "nobody can serve" not in html
    # htmx polling, with a pause control
    assert 'hx-trigger="every 5s"' in html and "data-poll" in html  # paused by bloomops.js
    assert 'id="pause-refresh"' in html and 'aria-pressed="false"' in html
    assert "django_htmx/htmx-2.min.js" in html


def test_dashboard_htmx_request_returns_only_the_panel(client, lab):
    make_subject("q1")
    response = signed_in(client, lab["operator"]).get("/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith("<section id=\"dashboard-panel\"")
    assert "<html" not in html


def test_dashboard_coverage_counts_online_workers_that_can_serve(client, lab):
    services.ensure_my_worker(lab["worker_human"])  # a human worker with every demo capability
    make_queue("exotic", required_worker_capabilities=["nobody.has.this"])
    html = signed_in(client, lab["operator"]).get("/").content.decode()
    row = html[html.index('data-queue="q1"'):]
    row = row[:row.index("</tr>")]
    assert "1 online" in row
    # who, in the cell itself: it was only in a hover title touch and keys cannot reach
    assert '<span class="muted who">online: ' in row
    exotic = html[html.index('data-queue="exotic"'):]
    assert "nobody can serve" in exotic[:exotic.index("</tr>")]
    # one person able to serve nine queues showed "3 free" in each, inviting a sum of 27
    header = html[html.index('<th scope="col" title="Who can serve each queue'):]
    assert "not to be added up" in header[:header.index("</th>")]


def test_a_lab_of_hundreds_is_named_twenty_at_a_time_in_the_coverage_title(client, lab):
    """Each coverage cell's title named all 435 rostered people (11 kB a row, on a page that
    refreshes every 5 s): twenty, and how many more."""
    from tests.conftest import make_user

    for n in range(22):
        make_user(f"bench{n:02d}", "worker_human")
    html = signed_in(client, lab["operator"]).get("/").content.decode()
    row = html[html.index('data-queue="q1"'):]
    title = re.search(r'class="coverage"[^>]* title="([^"]*)"', row[:row.index("</tr>")])
    assert title and "and 3 more." in title.group(1), title
    assert title.group(1).count(",") < 30


def test_supervisor_sees_a_throughput_trend_drawn_from_execution_records(client, lab):
    who = actor("worker_human", username="sci")
    euid = make_subject("q1")
    worker = services.ensure_my_worker(lab["worker_human"])
    lease = act("claim_queue_item", who, worker_euid=worker, queue_key="q1")
    act("complete_queue_execution", who, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"next_queue_key": "q2"})
    assert selectors.throughput_trend()["q1"][-1] == 1
    html = signed_in(client, lab["operator"]).get("/").content.decode()
    assert "Done per hour (12 h)" in html and "<svg class=\"spark\"" in html
    # its accessible name carries the numbers; a queue nothing finished in says so
    assert re.search(r'aria-label="q1 completions per hour, oldest first: (0, ){11}1"', html)
    q2 = html.split('data-queue="q2"')[1].split("</tr>")[0]
    assert "none in 12 h" in q2
    assert envelope(euid)["next_queue_key"] == "q2"
    worker_html = signed_in(client, lab["worker_human"]).get("/").content.decode()
    assert "Done per hour (12 h)" not in worker_html


def test_queue_detail_lists_visible_items_in_execution_order(client, lab):
    make_subject("q1", name="routine old", ready_at="2020-01-01T00:00:00.000000Z")
    make_subject("q1", name="urgent", priority=PRIORITY_CLASSES["URGENT"])
    make_subject("q1", name="stat", priority=PRIORITY_CLASSES["STAT"],
                 due_at="2030-01-01T00:00:00.000000Z")
    response = signed_in(client, lab["worker_human"]).get("/queues/q1/")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.index(">stat<") < html.index(">urgent<") < html.index(">routine old<")
    assert 'class="badge prio-stat">STAT</span>' in html and "prio-urgent" in html
    # the number too: it orders items of one class (ROUTINE 20 before ROUTINE 10)
    assert f'URGENT</span> <span class="prio-number">{PRIORITY_CLASSES["URGENT"]}</span>' in html
    assert 'title="2030-01-01 00:00:00 UTC"' in html  # due time, exact on hover
    assert "3 visible items" in html
    assert 'id="claim-next"' in html and ">Claim</button>" in html
    squashed = re.sub(r"\s*<", "<", re.sub(r">\s*", ">", html))
    for col in ("Ready", "Due", "Attempts", "Age", "Site", "Platform", "Assay"):
        assert f">{col}<" in squashed


def test_queue_detail_hides_claim_controls_from_operators(client, lab):
    make_subject("q1")
    html = signed_in(client, lab["operator"]).get("/queues/q1/").content.decode()
    assert 'id="claim-next"' not in html and ">Claim</button>" not in html


def test_queue_detail_filters_by_site_platform_assay(client, lab):
    make_subject("q1", name="in sfo", props={"site": "sfo", "assay": "wgs"})
    make_subject("q1", name="in rtp", props={"site": "rtp", "assay": "rna"})
    client = signed_in(client, lab["operator"])
    html = client.get("/queues/q1/?site=rtp").content.decode()
    assert "in rtp" in html and "in sfo" not in html
    html = client.get("/queues/q1/?assay=wgs&site=rtp").content.decode()
    assert "0 visible items" in html
    # the filter menus offer the values present in the queue
    html = client.get("/queues/q1/").content.decode()
    assert '<option value="rtp"' in html and '<option value="rna"' in html


def test_queue_detail_says_a_filter_no_item_has_and_lists_every_item(client, lab):
    """A bookmark's site=BER after the last BER item had gone read "0 visible items" under a
    site menu saying "any"; a state nobody has (state=HLD) listed the visible items unsaid."""
    make_subject("q1", name="in sfo", props={"site": "sfo"})
    client = signed_in(client, lab["operator"])
    html = client.get("/queues/q1/?site=BER&state=HLD").content.decode()
    assert "No site &#x27;BER&#x27;: no subject of this queue has it; every site is shown." \
        in html
    assert "No state &#x27;HLD&#x27;: the visible items are listed." in html
    assert "in sfo" in html and "1 visible item," in html
    rows = list(csv.reader(io.StringIO(client.get(
        "/queues/q1/export.csv?site=BER").content.decode("utf-8-sig"))))
    assert [r[2] for r in rows[1:]] == ["in sfo"]  # the export lists what the page did
    assert "filter-note" not in client.get("/queues/q1/?site=sfo").content.decode()


def test_queue_detail_non_visible_state_lists_items_with_their_reasons(client, lab):
    op = actor("operator", username="op")
    held = make_subject("q1", name="held one")
    make_subject("q1", name="visible one")
    make_subject("q1", name="later", ready_at="2099-01-01T00:00:00.000000Z")
    act("place_execution_hold", op, subject_euid=held, expected_state="READY",
        payload={"reason": "contamination suspected"})
    client = signed_in(client, lab["operator"])
    html = client.get("/queues/q1/?state=HELD").content.decode()
    assert "held one" in html and "visible one" not in html
    assert "An active hold." in html and "State not eligible" in html
    html = client.get("/queues/q1/?state=READY").content.decode()
    assert "later" in html and "Not ready yet." in html and "visible one" not in html
    # the visible list no longer shows the held item
    html = client.get("/queues/q1/").content.decode()
    assert "held one" not in html and "visible one" in html


def test_a_queue_whose_settings_turn_its_diagnostics_off_lists_no_hidden_items(client, lab):
    """diagnostics_enabled was saved and recorded, and nothing read it: the page went on
    listing the items it did not show."""
    make_queue("quiet", display_name="Quiet", diagnostics_enabled=False)
    make_subject("quiet", name="later", ready_at="2099-01-01T00:00:00.000000Z")
    visible = make_subject("quiet", name="visible one")
    client = signed_in(client, lab["operator"])
    html = client.get("/queues/quiet/?state=READY").content.decode()
    assert 'id="diagnostics-off"' in html and "later" not in html and visible in html
    assert "Showing" not in html  # nothing else to show: no list of one choice
    answer = client.get("/queues/quiet/export.csv?state=READY")
    assert answer.status_code == 403 and b"later" not in answer.content
    # a queue that keeps them on lists them
    html = client.get("/queues/q1/?state=READY").content.decode()
    assert 'id="diagnostics-off"' not in html and 'value="READY"' in html


@pytest.mark.parametrize(("role", "shown"), [("admin", True), ("operator", False),
                                             ("worker_human", False)])
def test_a_queue_kept_from_operators_is_on_the_dashboard_of_admins_alone(
        client, lab, role, shown):
    """operator_visible was saved and recorded, and nothing read it."""
    from bloomops.execution.stats.recorder import record

    make_queue("machine", display_name="Machine queue", operator_visible=False)
    record()  # a sample, so that the charts are drawn
    client = signed_in(client, lab[role])
    html = client.get("/").content.decode()
    assert ('data-queue="machine"' in html) is shown
    assert ('id="charts-machine"' in html) is shown
    assert 'data-queue="q1"' in html
    if shown:
        row = html[html.index('data-queue="machine"'):]
        assert '<span class="badge">admins only</span>' in row[:row.index("</tr>")]
    # the lab's chart counts every queue: a reader not shown one is told so beside it
    assert ("Lab, every queue (the 1 kept for admins too)" in html) is not shown

def test_queue_detail_is_paginated_in_sql(client, lab):
    for i in range(30):
        make_subject("q1", name=f"item {i:02d}", ready_at=f"2020-01-01T00:00:{i:02d}.000000Z")
    client = signed_in(client, lab["operator"])
    first = client.get("/queues/q1/").content.decode()
    assert "30 visible items" in first
    assert "item 00" in first and "item 24" in first and "item 25" not in first
    second = client.get("/queues/q1/?page=2").content.decode()
    assert "item 25" in second and "item 29" in second and "item 00" not in second
    # a page past the last, however far (a number no integer column holds), is the last
    for page in ("9", "9" * 25):
        beyond = client.get(f"/queues/q1/?page={page}")
        assert beyond.status_code == 200
        html = beyond.content.decode()
        assert "item 25" in html and "item 29" in html and "item 24" not in html, page


def test_queue_detail_unknown_queue_is_404(client, lab):
    assert signed_in(client, lab["operator"]).get("/queues/nope/").status_code == 404


def test_csv_export_of_the_filtered_view(client, lab):
    make_subject("q1", name="=HYPERLINK(1)", props={"site": "sfo"}, priority=-5)
    make_subject("q1", name="rtp item", props={"site": "rtp"})
    response = signed_in(client, lab["operator"]).get("/queues/q1/export.csv?site=sfo")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    # a byte-order mark: Excel reads the file as UTF-8, not as the machine's code page
    assert response.content.startswith("\ufeff".encode())
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert rows[0][:3] == ["position", "euid", "name"]
    assert len(rows) == 2
    assert rows[1][2] == "'=HYPERLINK(1)"  # no spreadsheet formula injection
    assert rows[1][rows[0].index("priority")] == "-5"  # a number stays a number
    assert rows[1][9] == "sfo"
    # every instant as stored instants are written, in every download
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z",
                        rows[1][rows[0].index("ready_at")])


def test_a_cut_export_says_so_on_its_last_line(client, lab, monkeypatch):
    """The export stopped at 10,000 rows of 11,107 with no word of it: read as the whole
    queue. Its last line says how many of how many."""
    from bloomops.web.views import queues

    for n in range(3):
        make_subject("q1", name=f"export {n}", props={"site": "sfo" if n else "rtp"})
    monkeypatch.setattr(queues, "EXPORT_LIMIT", 2)
    response = signed_in(client, lab["operator"]).get("/queues/q1/export.csv")
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert len(rows) == 4 and rows[-1] == [
        "# only the first 2 of 3 items: narrow the filter to export the rest"]
    whole = signed_in(client, lab["operator"]).get("/queues/q1/export.csv?site=rtp")
    assert not any(r and r[0].startswith("#") for r in
                   csv.reader(io.StringIO(whole.content.decode("utf-8-sig"))))


def test_csv_export_of_a_hidden_state_carries_the_reasons(client, lab):
    op = actor("operator", username="op")
    held = make_subject("q1", name="held")
    act("place_execution_hold", op, subject_euid=held, expected_state="READY",
        payload={"reason": "why not"})
    rows = list(csv.reader(io.StringIO(signed_in(client, lab["operator"]).get(
        "/queues/q1/export.csv?state=HELD").content.decode("utf-8-sig"))))
    assert rows[0][-1] == "not_visible_because"
    assert rows[1][0] == held and "An active hold." in rows[1][-1]


def test_subject_names_are_escaped_everywhere(client, lab):
    evil = "<script>alert(1)</script>"
    euid = make_subject("q1", name=evil)
    op = actor("operator", username="op")
    act("place_execution_hold", op, subject_euid=euid, expected_state="READY",
        payload={"reason": evil})
    client = signed_in(client, lab["operator"])
    for path in ("/queues/q1/?state=HELD", f"/subjects/{euid}/", "/workbench/"):
        html = client.get(path).content.decode()
        assert evil not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path


def test_subject_inspector_shows_envelope_reasons_history_lineage_audit(client, lab):
    op = actor("operator", username="op")
    euid = make_subject("q1", name="inspect me")
    act("place_execution_hold", op, subject_euid=euid, expected_state="READY",
        payload={"reason": "QA review"})
    response = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Execution envelope" in html and "next_queue_key" in html
    assert "ACTIVE_HOLD" in html and "QA review" in html
    assert "place_execution_hold" in html and ">op<" in html  # action history: who, what
    assert "execution_subject_hold" in html  # lineage with relationship type
    assert "TapDB audit trail" in html and "INSERT" in html
    # held, where it is: it had read "not in a queue" above "routed to q1"
    assert '<span class="badge bad" id="visibility">held in q1</span>' in html


def test_a_history_names_people_as_they_were_named_when_they_acted(client, lab):
    """The action history named each person by today's account: renamed later, an auditor
    read the new name beside a signature that kept the old. The record keeps the name as it
    read when they acted; what was done is said in words, its key beside it."""
    from django.contrib.auth.models import User

    from bloomops.execution.context import Actor

    user = User.objects.create_user("sasha", first_name="Sasha", last_name="Lindqvist")
    euid = make_subject("q1", name="renamed later")
    act("place_execution_hold", actor("operator", username="sasha"), subject_euid=euid,
        expected_state="READY", payload={"reason": "QA review"})  # an actor with no name
    act("release_execution_hold", Actor.of(user), subject_euid=euid, expected_state="HELD",
        payload={"reason": "checked"})
    user.first_name, user.last_name = "Mallory", "Jones"
    user.save()
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    rows = html.split('id="actions"')[1].split("</table>")[0].split("<tr>")
    placed = next(r for r in rows if "place_execution_hold" in r)
    released = next(r for r in rows if "release_execution_hold" in r)
    assert "Sasha Lindqvist (sasha)" in released and "Mallory" not in released
    assert "Release hold" in released and "Place hold" in placed


def test_the_inspector_says_when_its_record_of_actions_does_not_verify(client, lab):
    """A record rewritten in the database showed as history like any other: the auditor had
    to think of running verify_chain. The inspector walks the subject's chain on every view
    and says which record does not verify."""
    from bloomops.tapdb.db import execute, fetch_value

    op = actor("operator", username="op")
    euid = make_subject("q1", name="rewritten")
    act("place_execution_hold", op, subject_euid=euid, expected_state="READY",
        payload={"reason": "QA review"})
    reader = signed_in(client, lab["operator"])
    assert 'id="chain-broken"' not in reader.get(f"/subjects/{euid}/").content.decode()
    record = fetch_value("SELECT euid FROM generic_instance WHERE subtype ="
                         " 'place_execution_hold' AND json_addl->'chain'->>'key' = %s", [euid])
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{reason}',"
            " '\"routine\"') WHERE euid = %s", [record])
    html = reader.get(f"/subjects/{euid}/").content.decode()
    banner = html.split('id="chain-broken"')[1].split("</div>")[0]
    assert "does not verify" in banner and f"<code>{record}</code>" in banner
    assert "content differs from its seal" in banner


def test_subject_inspector_timeline_and_dead_letter(client, lab):
    who = actor("worker_human", username="sci")
    worker = services.ensure_my_worker(lab["worker_human"])
    euid = make_subject("q1", name="doomed")
    lease = act("claim_queue_item", who, worker_euid=worker, subject_euid=euid)
    act("fail_queue_execution", who, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"error_class": "PERMANENT_INPUT",
                                         "error_message": "tube cracked"})
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    assert 'id="timeline"' in html and "FAILED_TERMINAL" in html and "tube cracked" in html
    assert "OPEN" in html and "PERMANENT_INPUT" in html  # the dead letter


def test_the_inspector_says_which_attempts_did_not_count(client, lab):
    """A released (or expired) claim's next try read "attempt 1" again, unexplained: only a
    failure counts an attempt."""
    who = actor("worker_human", username="sci")
    worker = services.ensure_my_worker(lab["worker_human"])
    euid = make_subject("q1", name="tried twice")
    for release in (True, False):
        lease = act("claim_queue_item", who, worker_euid=worker, subject_euid=euid)
        if release:
            act("release_queue_lease", who, worker_euid=worker, expected_state="READY",
                lease_euid=lease["lease_euid"], payload={"reason": "wrong rack"})
        else:
            act("fail_queue_execution", who, worker_euid=worker, expected_state="READY",
                lease_euid=lease["lease_euid"],
                payload={"error_class": "TRANSIENT_SYSTEM", "error_message": "power cut"})
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    records = html.split('id="timeline"')[1].split("</ol>")[0].split("<li>")[1:]
    uncounted = ["not counted toward the attempt limit: only a failure counts" in r
                 for r in records]
    assert sorted(uncounted) == [False, True]
    assert all("attempt 1 " in r for r in records)  # the released one's number, kept


def test_subject_lookup_and_missing_subject(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["worker_human"])
    response = client.get(f"/subjects/?euid={euid.lower()}")
    assert response.status_code == 302 and response["Location"] == f"/subjects/{euid}/"
    missing = client.get("/subjects/Z-MX-999999/")
    assert missing.status_code == 404 and "No subject" in missing.content.decode()
    # an empty lookup is asked for first (required), and told if sent anyway
    assert re.search(r'<input id="lookup-euid" name="euid" required', missing.content.decode())
    empty = client.get("/subjects/?euid=+", follow=True)
    assert "Type an EUID or a subject&#x27;s name to inspect it." in empty.content.decode()


def test_inspector_controls_follow_the_role(client, lab):
    euid = make_subject("q1")
    op_html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/")
    assert has_form(op_html, f"/subjects/{euid}/hold/")
    assert has_form(op_html, f"/subjects/{euid}/requeue/")
    assert has_form(op_html, f"/subjects/{euid}/cancel/")
    assert not has_form(op_html, f"/subjects/{euid}/claim/")
    sci_html = signed_in(client, lab["worker_human"]).get(f"/subjects/{euid}/")
    assert has_form(sci_html, f"/subjects/{euid}/claim/")
    for verb in ("hold", "requeue", "cancel", "release-hold"):
        assert not has_form(sci_html, f"/subjects/{euid}/{verb}/")


def test_scan_page_has_an_autofocused_labelled_field(client, lab):
    html = signed_in(client, lab["worker_human"]).get("/scan/").content.decode()
    assert '<label for="scan-euid">' in html
    assert 'id="scan-euid"' in html and "autofocus" in html


def test_my_work_before_any_claim(client, lab):
    html = signed_in(client, lab["worker_human"]).get("/my-work/").content.decode()
    # in the bench's words: no "leases", a word of the engine
    assert "You are working on nothing" in html and "registered with your first claim" in html
    assert "lease" not in html.split('id="no-leases"')[1].split("</p>")[0]
    assert services.my_worker_euid(lab["worker_human"]) is None  # a GET writes nothing


def test_worker_dashboard_shows_status_heartbeat_and_leases(client, lab):
    worker = services.ensure_my_worker(lab["worker_human"])
    make_subject("q1")
    act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
        queue_key="q1")
    response = signed_in(client, lab["operator"]).get("/workers/")
    html = response.content.decode()
    assert worker in html and "human://sci" in html
    assert "status-online" in html and "1 of 5" in html and "wetlab.extraction" in html
    assert "/status/" not in html  # operators see no admin buttons
    clock.advance(2 * 3600)
    html = client.get("/workers/").content.decode()
    assert "status-offline" in html and "2 h ago" in html
    admin_html = signed_in(client, lab["admin"]).get("/workers/").content.decode()
    assert f"/workers/{worker}/status/" in admin_html
    # An online worker offers what changes it (tests/test_operator_controls.py: every state).
    for op in ("Drain", "Disable"):
        assert f">{op} sci</button>" in admin_html
    assert ">Enable</button>" not in admin_html


def test_workbench_lists_dead_letters_and_holds_with_filters(client, lab):
    who = actor("worker_human", username="sci")
    op = actor("operator", username="op")
    worker = services.ensure_my_worker(lab["worker_human"])
    dead = make_subject("q1", name="dead one")
    lease = act("claim_queue_item", who, worker_euid=worker, subject_euid=dead)
    act("fail_queue_execution", who, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": False, "error_message": "bad input"})
    held = make_subject("q2", name="held one", code="content/material/specimen/1.0")
    act("place_execution_hold", op, subject_euid=held, expected_state="READY",
        payload={"reason": "awaiting QA"})
    client = signed_in(client, lab["operator"])
    html = client.get("/workbench/").content.decode()
    assert "dead one" in html and "bad input" in html and "held one" in html
    # the failure's kind in the words the Failures page uses, its code on hover
    assert re.search(r'<span class="tag" title="[A-Z_]+">Cannot be done[^<]*</span>: bad input',
                     html)
    # Requeueing a dead letter needs a second person by default: each row asks for it.
    assert "awaiting QA" in html and "Release selected" in html
    assert "Ask for approval to requeue" in html and "Requeue selected" not in html
    html = client.get("/workbench/?queue=q2").content.decode()
    assert "held one" in html and "dead one" not in html
    html = client.get("/workbench/?q=bad+input").content.decode()
    assert "dead one" in html and "held one" not in html
    sci = signed_in(client, lab["worker_human"]).get("/workbench/").content.decode()
    assert "dead one" in sci and "Requeue selected" not in sci
    assert "Ask for approval to requeue" not in sci


def test_a_long_failure_or_hold_reason_is_clipped_on_the_workbench_whole_on_its_subject(
        client, lab):
    """A 4,000-character stack trace made one workbench row several screens tall; the lists
    show its first 200 characters, the subject's page the whole."""
    who = actor("worker_human", username="sci")
    op = actor("operator", username="op")
    worker = services.ensure_my_worker(lab["worker_human"])
    dead = make_subject("q1", name="dead one")
    trace = "Traceback: " + " ".join(f"frame{i}" for i in range(400))
    lease = act("claim_queue_item", who, worker_euid=worker, subject_euid=dead)
    act("fail_queue_execution", who, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": False, "error_message": trace})
    held = make_subject("q1", name="held one")
    act("place_execution_hold", op, subject_euid=held, expected_state="READY",
        payload={"reason": "QA: " + "long words " * 100 + "END-OF-REASON"})
    client = signed_in(client, lab["operator"])
    html = client.get("/workbench/").content.decode()
    assert trace[:150] in html and "frame399" not in html
    assert "QA: long words" in html and "END-OF-REASON" not in html
    assert "frame399" in client.get(f"/subjects/{dead}/").content.decode()


def test_the_workbench_shows_the_newest_of_how_many_and_searches_them_all(
        client, lab, monkeypatch):
    """At lab scale the workbench listed 2,000 retrying, 500 dead letters and 500 holds as
    if that were all (14,082, 6,088 and 7,835), and its search looked only at those: it
    says the newest N of how many, and searches in SQL, past the limit."""
    from bloomops.web.views import admin

    op = actor("operator", username="op")
    held = [make_subject("q1", name=f"held {n}") for n in range(3)]
    for n, euid in enumerate(held):
        act("place_execution_hold", op, subject_euid=euid, expected_state="READY",
            payload={"reason": f"rack {n} check"})
    monkeypatch.setattr(admin, "WORKBENCH_ROWS", 2)
    client = signed_in(client, lab["operator"])
    html = client.get("/workbench/").content.decode()
    assert "Active holds (the newest 2 of 3)" in html and "held 0" not in html
    found = client.get("/workbench/?q=RACK+0").content.decode()
    assert "Active holds (1)" in found and "held 0" in found and "held 2" not in found


def test_admin_page_lists_active_leases_with_force_expire_for_admins(client, lab):
    worker = services.ensure_my_worker(lab["worker_human"])
    make_subject("q1")
    lease = act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
                queue_key="q1")
    html = signed_in(client, lab["admin"]).get("/admin/").content.decode()
    assert lease["lease_euid"] in html and "Force-expire" in html and "Run the sweeper" in html
    op_html = signed_in(client, lab["operator"]).get("/admin/").content.decode()
    assert "Force-expire</button>" not in op_html and "run-sweeper" not in op_html


def test_nav_shows_each_role_its_screens(client, lab):
    sci = signed_in(client, lab["worker_human"]).get("/").content.decode()
    assert 'href="/scan/"' in sci and 'href="/my-work/"' in sci and 'href="/admin/"' not in sci
    op = signed_in(client, lab["operator"]).get("/").content.decode()
    assert 'href="/scan/"' not in op and 'href="/workbench/"' in op
    # the hold search answers auditors as the failure search does: both a screen of its own
    assert 'href="/holds/"' in op and 'href="/failures/"' in op
    assert 'href="/holds/"' not in sci
    adm = signed_in(client, lab["admin"]).get("/").content.decode()
    assert 'href="/admin/"' in adm and 'href="/scan/"' in adm


@pytest.mark.parametrize("path", ["/", "/queues/q1/", "/scan/", "/my-work/", "/workers/",
                                  "/workbench/", "/admin/", "/queues/q1/export.csv"])
def test_every_screen_needs_a_role(client, lab, django_user_model, path):
    nobody = django_user_model.objects.create_user("nobody", password="x")
    assert signed_in(client, nobody).get(path).status_code == 403
    client.logout()
    assert client.get(path).status_code == 302  # signed out: to the sign-in page


def test_every_screen_works_on_the_demo_data_with_a_bounded_number_of_queries(
        client, tenant, users, django_assert_max_num_queries):
    from bloomops.demo.data import seed_demo

    seed_demo()
    worker = services.ensure_my_worker(users["worker_human"])
    lease = act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
                queue_key="extraction_prod")
    euid = lease["subject_euid"]
    client = signed_in(client, users["admin"])
    client.get("/")  # warm the session and template caches
    # session, user, roles + no fresh snapshot (1), so live, in its turn (an advisory lock
    # and its release, 2): queue summaries (4) + workers + rostered people + trend + the
    # history samples (1) + approvals waiting (navigation and panel, one read) + the items
    # an admin at the bench holds (navigation, one read) + an admin's tokens about to expire
    # (one read) + the work waiting outside (one read): never a query per row
    with django_assert_max_num_queries(21):
        response = client.get("/")
    assert response.status_code == 200 and len(response.context["summaries"]) == 11
    # + who gave the person the password they sign with (the page's banner, one read)
    # + who can work the queue (its coverage panel: the workers and the rostered people)
    with django_assert_max_num_queries(17):
        assert client.get("/queues/extraction_prod/").status_code == 200
    for path in ("/queues/extraction_prod/?state=READY", "/queues/extraction_prod/?page=3",
                 "/queues/analysis_dispatch/export.csv", "/scan/", "/my-work/",
                 f"/subjects/{euid}/", "/workers/", "/workbench/", "/admin/"):
        assert client.get(path).status_code == 200, path


def test_queue_detail_flags_overdue_items(client, lab):
    make_subject("q1", name="late one", due_at="2020-01-01T00:00:00.000000Z")
    make_subject("q1", name="on time", due_at="2099-01-01T00:00:00.000000Z")
    html = signed_in(client, lab["operator"]).get("/queues/q1/").content.decode()
    rows = {name: html[html.index(name):][:900] for name in ("late one", "on time")}
    assert "overdue" in rows["late one"] and "overdue" not in rows["on time"]


def test_workers_show_what_each_works_on_and_filter(client, lab):
    worker = services.ensure_my_worker(lab["worker_human"])
    euid = make_subject("q1", name="Tube on the bench")
    act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
        queue_key="q1")
    svc = register(actor("worker_service"), worker_key="svc://sequencer-7",
                   capabilities=["seq.run"])
    client = signed_in(client, lab["operator"])
    html = client.get("/workers/").content.decode()
    row = html.split(f'data-worker="{worker}"')[1].split("</tr>")[0]
    assert "Tube on the bench" in row and f"/subjects/{euid}/" in row
    assert "nothing" in html.split(f'data-worker="{svc}"')[1].split("</tr>")[0]
    assert "2 of 2 workers" in html
    only_service = client.get("/workers/?type=SERVICE").content.decode()
    assert svc in only_service and f'data-worker="{worker}"' not in only_service
    by_text = client.get("/workers/?q=seq.run").content.decode()
    assert "1 of 2 workers" in by_text and svc in by_text
    none = client.get("/workers/?status=DISABLED").content.decode()
    assert "No worker matches the filter." in none


def test_retired_workers_are_listed_after_those_in_service(client, lab):
    """A supervisor read retired adapters among the online workers, by key."""
    svc = actor("worker_service")
    old = register(svc, worker_key="a://old-adapter")
    new = register(svc, worker_key="b://new-adapter")
    act("set_worker_status", actor("admin", username="adm"), worker_euid=old,
        payload={"operation": "retire", "reason": "replaced"})
    html = signed_in(client, lab["operator"]).get("/workers/").content.decode()
    assert html.index(f'data-worker="{new}"') < html.index(f'data-worker="{old}"')


def test_every_worker_names_its_newest_items_and_counts_the_rest(client, lab, monkeypatch):
    """The page read the lab's newest 500 leases: at 8,180 most workers read "32 of 50"
    leases yet "working on nothing". Each worker names its own newest few, and counts the
    rest."""
    from bloomops.web.views import admin

    monkeypatch.setattr(admin, "WORKING_SHOWN", 2)
    svc = actor("worker_service")
    first = register(svc, worker_key="svc://a", capabilities=[], max_concurrent_leases=5)
    second = register(svc, worker_key="svc://b", capabilities=[], max_concurrent_leases=5)
    make_queue("qw", required_worker_capabilities=[])
    for n in range(3):
        make_subject("qw", name=f"tube a{n}")
        act("claim_queue_item", svc, worker_euid=first, queue_key="qw")
    make_subject("qw", name="tube b0")
    act("claim_queue_item", svc, worker_euid=second, queue_key="qw")
    html = signed_in(client, lab["operator"]).get("/workers/").content.decode()
    a = html.split(f'data-worker="{first}"')[1].split("</tr>")[0]
    b = html.split(f'data-worker="{second}"')[1].split("</tr>")[0]
    assert "tube a2" in a and "tube a1" in a and "tube a0" not in a and "and 1 more" in a
    assert "tube b0" in b and "more" not in b


def test_the_admin_page_says_of_how_many_leases_and_narrows_them(client, lab, monkeypatch):
    """"Active leases (500)" of 8,180, with no way to reach the rest to force-expire one:
    the page says of how many, and narrows by queue and worker."""
    from bloomops.execution import selectors as read

    svc = actor("worker_service")
    first = register(svc, worker_key="svc://a", capabilities=[], max_concurrent_leases=5)
    second = register(svc, worker_key="svc://b", capabilities=[], max_concurrent_leases=5)
    make_queue("qw", required_worker_capabilities=[])
    for worker in (first, first, second):
        make_subject("qw")
        act("claim_queue_item", svc, worker_euid=worker, queue_key="qw")
    leases = read.leases
    monkeypatch.setattr("bloomops.web.views.admin.selectors.leases",
                        lambda **kw: leases(**{**kw, "limit": 2}))
    admin_page = signed_in(client, lab["admin"])
    html = admin_page.get("/admin/").content.decode()
    assert "Active leases (the newest 2 of 3: narrow by queue or worker)" in html
    narrowed = admin_page.get(f"/admin/?worker={second.lower()}&queue=qw").content.decode()
    assert "Active leases (1)" in narrowed  # an EUID typed in lower case is the same one


def test_admin_page_lists_the_leases_past_expiry(client, lab):
    worker = services.ensure_my_worker(lab["worker_human"])
    make_subject("q1", name="Forgotten tube")
    lease = act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
                queue_key="q1")
    clock.advance(3 * 3600)
    html = signed_in(client, lab["admin"]).get("/admin/").content.decode()
    table = html.split('id="expired-leases"')[1].split("</table>")[0]
    assert lease["lease_euid"] in table and "Forgotten tube" in table
    assert "Past expiry, waiting for the sweeper (1)" in html


def test_the_fail_rate_says_how_many_of_how_many_and_links_to_the_failures(client, lab):
    """The fail rate leads to where the queue's failures went (RULES.md#statistics): the
    hour's failed attempts, each with where its subject is now (the one retrying, the one
    held)."""
    who = actor("worker_human", username="sci")
    worker = services.ensure_my_worker(lab["worker_human"])
    make_subject("q1", name="flaky one")
    lease = act("claim_queue_item", who, worker_euid=worker, queue_key="q1")
    act("fail_queue_execution", who, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": True, "error_message": "jammed"})
    make_subject("q1", name="needs a decision")
    lease = act("claim_queue_item", who, worker_euid=worker, queue_key="q1")
    act("fail_queue_execution", who, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": True, "error_message": "unclear"})
    act("place_execution_hold", actor("operator"), subject_euid=lease["subject_euid"],
        expected_state="FAILED_RETRYABLE", payload={"reason": "QA decides"})
    client = signed_in(client, lab["operator"])
    html = client.get("/").content.decode()
    cell = html.split('data-queue="q1"')[1].split('class="num fail-rate"')[1].split("</td>")[0]
    assert 'href="/failures/?queue=q1&amp;range=1h#attempts"' in cell
    assert "100 %" in cell and "2 of 2" in cell
    assert 'href="/failures/?queue=q1&amp;kind=retrying"' in html
    landing = client.get("/failures/?queue=q1&range=1h").content.decode()
    attempts = landing.split('id="failed-attempts"')[1].split("</table>")[0]
    for name, now in (("flaky one", "FAILED_RETRYABLE in Queue one (q1)"),
                      ("needs a decision", "HELD")):
        row = attempts.split(f">{name}</a>")[1].split("</tr>")[0]
        assert "failed, to be retried" in row and now in row


def test_the_leased_count_leads_to_who_holds_those_leases(client, lab):
    """The dashboard's leased count links to the workers holding leases in that queue, each
    with those leases only; a worker with leases elsewhere only is not listed."""
    sci = actor("worker_human", username="sci")
    worker = services.ensure_my_worker(lab["worker_human"])
    make_subject("q1", name="in the hood")
    act("claim_queue_item", sci, worker_euid=worker, queue_key="q1")
    svc = actor("worker_service")
    robot = register(svc, "robot-q2", capabilities=["wetlab.qc"])
    make_subject("q2", name="on the robot")
    act("claim_queue_item", svc, worker_euid=robot, queue_key="q2")
    client = signed_in(client, lab["operator"])
    html = client.get("/").content.decode()
    row = re.search(r'<tr data-queue="q1".*?</tr>', html, re.S).group(0)
    cell = row.split('class="num leased"')[1].split("</td>")[0]
    assert 'href="/workers/?queue=q1"' in cell and ">1</a>" in cell
    # and the queue's own page leads there: what is in progress, and with whom
    queue_page = client.get("/queues/q1/").content.decode()
    assert 'href="/workers/?queue=q1" id="queue-in-progress"' in queue_page
    page = client.get("/workers/?queue=q1").content.decode()
    assert 'id="workers-queue"' in page and "in the hood" in page
    assert "on the robot" not in page and "robot-q2" not in page
    everyone = client.get("/workers/").content.decode()
    assert "in the hood" in everyone and "on the robot" in everyone
    for unknown in ("nowhere", "a/b", '"><b>x</b>'):
        # said, and every worker shown (it read "no queue" over an empty list)
        page = client.get("/workers/", {"queue": unknown})
        assert page.status_code == 200 and "No queue " in page.content.decode()
        assert "<b>x</b>" not in page.content.decode() and "in the hood" in (
            page.content.decode()) and 'id="workers-queue"' not in page.content.decode()


def test_a_queues_leases_are_found_however_many_newer_leases_other_queues_hold(lab):
    """The workers page's queue filter asks for that queue's leases; the list's limit
    applies to them, not to every active lease of the lab first."""
    sci = actor("worker_human", username="sci")
    worker = services.ensure_my_worker(lab["worker_human"])
    make_subject("q1", name="in the hood")
    act("claim_queue_item", sci, worker_euid=worker, queue_key="q1")
    svc = actor("worker_service")
    robot = register(svc, "robot-q2", capabilities=["wetlab.qc"], max_concurrent_leases=5)
    for n in range(3):
        make_subject("q2", name=f"on the robot {n}")
        act("claim_queue_item", svc, worker_euid=robot, queue_key="q2")
    newest = selectors.leases(status="ACTIVE", limit=2)
    assert {x["props"]["queue_lookup_key"] for x in newest} == {"q2"}
    found = selectors.leases(status="ACTIVE", queue_key="q1", limit=2)
    assert [x["subject_name"] for x in found] == ["in the hood"]


def test_the_inspector_names_the_worker_holding_the_lease(client, lab):
    worker = services.ensure_my_worker(lab["worker_human"])
    euid = make_subject("q1")
    act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
        queue_key="q1")
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    lease = html.split("<h3>Active lease</h3>")[1].split("</p>")[0]
    assert f"by sci <code>{worker}</code>" in lease and "<time" in lease


def test_the_inspector_requeues_to_a_queue_that_takes_the_subject(client, lab):
    """A subject left in a queue that does not take its template (another writer put it
    there) is offered the queues that do, and requeued to the one chosen."""
    make_queue("q_analysis", subject_template_codes=["data/analysis/analysis_request/1.0"])
    # takes specimens, but not of this site: the subject would be invisible there too
    make_queue("q_rtp", site_scope=["rtp"])
    euid = make_subject("q_analysis", name="misrouted")
    operator = signed_in(client, lab["operator"])
    page = operator.get(f"/subjects/{euid}/")
    html = page.content.decode()
    choices = re.search(r'<select id="requeue-queue" name="queue_key">(.*?)</select>', html,
                        re.S).group(1)
    keys = re.findall(r'<option value="([^"]+)"', choices)
    assert "q1" in keys and "q_analysis" not in keys and "q_rtp" not in keys
    # the confirmation names the queue chosen (operator.js fills {queue} from the list)
    assert 'data-confirm="' + euid + ' goes to {queue} as ready' in html
    data = form_for(page, f"/subjects/{euid}/requeue/", queue_key="q1", reason="misrouted")
    operator.post(f"/subjects/{euid}/requeue/", data)
    assert envelope(euid)["next_queue_key"] == "q1"


def test_the_inspector_says_when_a_retry_is_due_humanely(client, lab):
    """Was "RETRY_WINDOW_NOT_REACHED Retry is not due until 2026-11-25T15:40:00.635467Z"."""
    euid = make_subject("q1", state="FAILED_RETRYABLE",
                        retry_at="2099-01-01T10:00:00.635467Z")
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    reasons = html.split('id="reasons"')[1].split("</ul>")[0]
    assert "The retry is due <time" in reasons
    assert "635467" not in reasons
    api = selectors.subject_diagnostics(euid)
    assert "2099-01-01T10:00:00.635467Z" in api.reasons[0].message  # the API's message keeps it


def test_the_history_names_the_worker_and_why_an_attempt_failed(client, lab):
    """A service account's actions read only "svc-extractor" (which station?), and a failed
    attempt's row was blank where the reason goes."""
    from tests.engine import SERVICE, claim

    svc = actor(*SERVICE)
    euid = make_subject("q1", name="Tube")
    worker = register(svc, capabilities=["wetlab.extraction"], display_name="Extractor 3")
    lease = claim(svc, worker, "q1")
    act("fail_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"error_class": "TRANSIENT_DEPENDENCY",
                                         "error_message": "centrifuge lid open"})
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    actions = html[html.index('id="actions"'):].split("</table>")[0]
    row = next(r for r in actions.split("<tr>") if "fail_queue_execution" in r)
    assert f"worker Extractor 3 <code>{worker}</code>" in row
    assert "TRANSIENT_DEPENDENCY: centrifuge lid open" in row
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row)  # to the second


def test_the_audit_trail_says_a_timestamp_rewritten_to_the_same_instant_is_unchanged(client,
                                                                                   lab):
    """Every change of a subject wrote an audit row "UPDATE created_dt" (TapDB's trigger
    writes the same instant in another form), which read as someone editing when the
    object was created."""
    euid = make_subject("q1", name="Tube")
    act("place_execution_hold", actor("operator"), subject_euid=euid, expected_state="READY",
        payload={"reason": "check"})
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    audit = html[html.index('id="h-audit"'):].split("</table>")[0]
    rows = [r for r in audit.split("<tr>") if "<td>created_dt</td>" in r]
    assert rows and all("the same instant, written in another form" in r for r in rows)


def test_a_released_hold_stays_readable_on_the_inspector(client, lab):
    """Once released, a hold vanished from the inspector ("None active"): its code, who
    placed and who released it, when and why, were left to the API and the evidence file."""
    euid = make_subject("q1", name="Tube")
    hold = act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
               expected_state="READY",
               payload={"hold_code": "SAMPLE_QUALITY", "reason": "particulate seen"})
    act("release_execution_hold", actor("operator", username="lead"), subject_euid=euid,
        hold_euid=hold["hold_euid"], expected_state="HELD",
        payload={"reason": "re-inspected: clean"})
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    table = html[html.index('id="hold-history"'):].split("</table>")[0]
    row = next(r for r in table.split("<tr>") if hold["hold_euid"] in r)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[1:4] == ["qa", f"SAMPLE_QUALITY <code>{hold['hold_euid']}</code>",
                          "particulate seen"]
    assert cells[5:] == ["lead", "re-inspected: clean"]
    assert row.count(" UTC</td>") == 2  # placed and ended, each to the second


@pytest.mark.parametrize("path", ["/queues/nope/", "/queues/nope/export.csv",
                                  "/settings/queues/nope/"])
def test_a_missing_page_is_the_consoles_own_even_with_debug_on(client, lab, settings, path):
    """With DEBUG on (make run), /queues/nope/ showed Django's debug 404 page, unlike the
    console's page for an unknown subject."""
    settings.DEBUG = True
    response = signed_in(client, lab["admin"]).get(path)
    html = response.content.decode()
    assert response.status_code == 404 and "<h1>Not found</h1>" in html
    assert "Using the URLconf" not in html and "Django tried these URL patterns" not in html


def test_an_address_that_is_no_page_is_the_consoles_own_404(client, lab):
    response = signed_in(client, lab["operator"]).get("/no-such-page/")
    assert response.status_code == 404 and "<h1>Not found</h1>" in response.content.decode()


def test_the_queues_address_is_the_dashboard(client, lab):
    """/queues/ (a queue's page is /queues/q1/) answered 404: the list of queues is the
    dashboard."""
    response = signed_in(client, lab["operator"]).get("/queues/")
    assert response.status_code == 302 and response["Location"] == "/"


def test_qa_finds_every_hold_by_code_person_and_time_ended_ones_too(client, lab):
    """QA could not answer "every hold for SAMPLE_QUALITY" or "every item I held last week":
    the workbench listed active holds only, and its filter did not know who placed them."""
    from bloomops.execution import clock

    old = make_subject("q1", name="Old tube")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=old,
        expected_state="READY", payload={"hold_code": "SAMPLE_QUALITY", "reason": "old"})
    clock.advance(10 * 86400)
    ended, active, other = (make_subject("q1", name=n) for n in ("Ended", "Active", "Other"))
    done = act("place_execution_hold", actor("operator", username="qa"), subject_euid=ended,
               expected_state="READY",
               payload={"hold_code": "SAMPLE_QUALITY", "reason": "haemolysed"})
    act("release_execution_hold", actor("operator", username="lead"), subject_euid=ended,
        hold_euid=done["hold_euid"], expected_state="HELD", payload={"reason": "respun"})
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=active,
        expected_state="READY", payload={"hold_code": "SAMPLE_QUALITY", "reason": "clot"})
    act("place_execution_hold", actor("operator", username="lead"), subject_euid=other,
        expected_state="READY", payload={"hold_code": "LABEL_ISSUE", "reason": "smudged"})
    client = signed_in(client, lab["worker_human"])  # anyone who reads may look

    def found(query: str) -> list[str]:
        html = client.get(f"/holds/?{query}").content.decode()
        return re.findall(r'<td data-label="Subject"><a href="/subjects/([^/]+)/"', html)

    assert found("code=SAMPLE_QUALITY&by=QA&since=7d") == [active, ended]
    assert found("code=SAMPLE_QUALITY&by=qa&since=all") == [active, ended, old]
    assert found("code=SAMPLE_QUALITY&by=qa&since=7d&status=active") == [active]
    assert found("by=lead&since=7d") == [other]
    from django.contrib.auth.models import User
    User.objects.update_or_create(username="qa", defaults={"first_name": "Quinn",
                                                         "last_name": "Okafor"})
    assert found("by=quinn+okafor&since=7d&status=active") == [active]  # a person's name
    html = client.get("/holds/?code=SAMPLE_QUALITY&since=7d").content.decode()
    row = html[html.index(f'/subjects/{ended}/'):].split("</tr>")[0]
    assert "respun" in row and "lead" in row
    assert client.get("/holds/?since=forever").status_code == 200  # read as the default
    assert client.get("/holds/?code=%00").status_code == 400  # as every console page
    # the hold a failure places is the engine's own code: offered to filter by too
    codes = re.findall(r'<option value="([A-Z_]+)"', html.split('id="hold-code"')[1]
                       .split("</select>")[0])
    assert "BUSINESS_RULE_HOLD" in codes and "SAMPLE_QUALITY" in codes


def test_holds_placed_today_are_those_of_the_readers_own_day(client, lab):
    """The shortest span was the last 24 hours: "what did we hold today" had no answer. Today
    is the reader's day, from the zone their browser names (UTC when it names none)."""
    from bloomops.execution import clock

    def hold_at(moment: str, name: str) -> str:
        clock.freeze(parse_ts(moment))
        subject = make_subject("q1", name=name)
        act("place_execution_hold", actor("operator", username="qa"), subject_euid=subject,
            expected_state="READY", payload={"reason": name})
        return subject

    late_evening = hold_at("2026-11-25T23:30:00Z", "Berlin's today")  # 00:30 in Berlin
    morning = hold_at("2026-11-26T09:00:00Z", "Everyone's today")  # 04:00 in New York
    clock.freeze(parse_ts("2026-11-26T10:00:00Z"))
    client = signed_in(client, lab["worker_human"])

    def found(query: str) -> tuple[list[str], str]:
        html = client.get(f"/holds/?since=today&{query}").content.decode()
        count = html.split('<p id="hold-count">')[1].split("</p>")[0]
        return re.findall(r'<td data-label="Subject"><a href="/subjects/([^/]+)/"', html), count

    assert found("tz=Europe/Berlin") == (
        [morning, late_evening], "2 holds placed today, since midnight of 2026-11-26"
        " (Europe/Berlin)")
    assert found("tz=UTC")[0] == [morning]
    assert found("tz=Pacific/Pago_Pago")[0] == [morning, late_evening]  # 23:00 on the 25th
    assert found("tz=Pacific/Honolulu")[0] == []  # its day began at 10:00 UTC, just now
    assert found("tz=America/New_York")[0] == [morning]
    # no zone, or one that is not a zone: UTC's day, and said so
    assert found("") == ([morning], "1 hold placed today, since midnight of 2026-11-26 (UTC)")
    assert found("tz=Mars/Olympus")[0] == [morning]
    assert found("tz=" + "x" * 5000)[0] == [morning]


def test_a_name_many_people_share_still_finds_each_ones_holds(client, lab):
    """"Lee" matched 60 people and the search kept the first 50 of them, unordered: the
    hold of the 60th read as none."""
    from django.contrib.auth.models import User

    User.objects.bulk_create(User(username=f"lee{n:02d}", first_name="Lee",
                                  last_name=f"Tester{n:02d}") for n in range(1, 61))
    subject = make_subject("q1", name="Tube")
    act("place_execution_hold", actor("operator", username="lee60"), subject_euid=subject,
        expected_state="READY", payload={"hold_code": "SAMPLE_QUALITY", "reason": "clot"})
    html = signed_in(client, lab["operator"]).get("/holds/?by=Lee&since=all").content.decode()
    assert re.findall(r'<td data-label="Subject"><a href="/subjects/([^/]+)/"', html) == [subject]


def test_a_visit_to_an_address_that_takes_a_form_says_so(client, lab):
    """A GET on an approval's decide address (a link shared, a reload) was an empty 405."""
    response = signed_in(client, lab["operator"]).get("/approvals/Z-EX-1/decide/")
    html = response.content.decode()
    assert response.status_code == 405 and "<h1>Not a page</h1>" in html
    assert response["Allow"] == "POST"
    api = signed_in(client, lab["operator"]).get("/api/v1/execution/actions/claim")
    assert api.status_code == 405 and api["Content-Type"].startswith("application/json")


def test_the_audit_trail_says_what_each_change_changed(client, lab):
    """A change's old and new JSON were cut at 80 and 160 characters, and both began with
    the same unchanged properties: HELD to READY could not be seen."""
    euid = make_subject("q1", name="Tube")
    act("place_execution_hold", actor("operator"), subject_euid=euid, expected_state="READY",
        payload={"reason": "check"})
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    audit = html[html.index('id="h-audit"'):].split("</table>")[0]
    held = next(r for r in audit.split("<tr>") if "<td>json_addl</td>" in r
                and "properties.execution.state" in r)
    # (a path wraps as text of any length does: code.free)
    assert ('<code class="free">properties.execution.state</code>: &quot;READY&quot; →'
            ' &quot;HELD&quot;') in held
    assert ('<code class="free">properties.execution.hold_state</code>: &quot;NONE&quot; →'
            ' &quot;ACTIVE&quot;') in held
    assert "properties.name" not in held  # what did not change is not listed


def test_the_inspector_says_a_subjects_standing_in_words(client, lab):
    """"Derived: VISIBLE_IN_QUEUE" beside "Derived: not visible": a code beside words."""
    euid = make_subject("q1", name="Tube")
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    assert 'Derived: <strong title="VISIBLE_IN_QUEUE">visible in its queue</strong>' in html


def test_the_audit_trail_tells_true_from_1_and_1_from_1_0():
    """A change from 1 to true (or 1.0) read as "nothing: the same value written again"."""
    from bloomops.execution.selectors.audit import json_changes

    assert json_changes('{"a": 1, "b": 0, "c": 1}', '{"a": true, "b": false, "c": 1.0}') == [
        ("a", "1", "true"), ("b", "0", "false"), ("c", "1", "1.0")]
    assert json_changes('{"a": {"x": 1}}', '{"a": {"x": 1}}') == []


def test_every_hold_screen_names_who_placed_and_released_a_hold_as_people_read_one(
        client, lab):
    """The inspector, the workbench and the hold search printed a hold's placer and releaser
    by username, where the approvals inbox and every history print the person's name."""
    from django.contrib.auth.models import User

    User.objects.create_user("qa-lead", first_name="Quinn", last_name="Avery")
    User.objects.create_user("qa-two", first_name="Rui", last_name="Sato")
    euid = make_subject("q1", name="held tube")
    done = act("place_execution_hold", actor("operator", username="qa-lead"),
               subject_euid=euid, expected_state="READY", payload={"reason": "label check"})
    act("release_execution_hold", actor("operator", username="qa-two"), subject_euid=euid,
        hold_euid=done["hold_euid"], expected_state="HELD", payload={"reason": "relabelled"})
    act("place_execution_hold", actor("operator", username="qa-lead"), subject_euid=euid,
        expected_state="READY", payload={"reason": "second look"})
    client = signed_in(client, lab["operator"])
    inspector = client.get(f"/subjects/{euid}/").content.decode()
    assert "(by Quinn Avery (qa-lead)," in inspector.split('id="active-holds"')[1]
    assert "Rui Sato (qa-two)" in inspector
    workbench = client.get("/workbench/").content.decode().split('id="holds"')[1]
    assert "<td>Quinn Avery (qa-lead)</td>" in workbench.split("</table>")[0]
    search = client.get("/holds/?since=all").content.decode()
    # each kept whole beside a long reason (a word of its own)
    assert '<td data-label="By"><span class="word">Quinn Avery (qa-lead)</span></td>' in search
    assert ('<td data-label="Ended by"><span class="word">Rui Sato (qa-two)</span></td>'
            in search)


def test_requeueing_completed_work_says_it_will_be_done_again(client, lab):
    """The requeue of a completed item asked only whether it should go to its queue "as ready
    for anyone to claim": an operator sent finished work round again unwarned."""
    done = make_subject("q1", name="finished tube", state="COMPLETED", next_queue_key=None)
    waiting = make_subject("q1", name="waiting tube")
    client = signed_in(client, lab["operator"])

    def confirm(euid: str) -> str:
        html = client.get(f"/subjects/{euid}/").content.decode()
        form = html[html.index(f'action="/subjects/{euid}/requeue/"'):]
        return form[form.index('data-confirm="'):].split('">')[0]

    assert "it was completed, and its work will be done again" in confirm(done)
    assert "completed" not in confirm(waiting)


def test_an_engine_objects_euid_leads_to_the_subject_it_belongs_to(client, lab):
    """A hold's, an approval's or an action record's EUID, as printed on the workbench and in
    every bundle, typed in Inspect: "No object with that EUID or name exists in this lab"."""
    euid = make_subject("q1", name="held for QA")
    done = act("place_execution_hold", actor("operator"), subject_euid=euid,
               expected_state="READY", payload={"reason": "check"})
    client = signed_in(client, lab["operator"])
    for typed, words in ((done["hold_euid"], "It is a hold of"),
                         (done.action_euid.lower(), "It is the record of an action (Place hold,"
                          " place_execution_hold) of")):
        page = client.get("/subjects/", {"euid": typed})
        assert page.status_code == 200
        said = page.content.decode().split('id="found-object">')[1].split("</p>")[0]
        assert said.startswith(words) and f'href="/subjects/{euid}/"' in said
    worker = register(actor("worker_service", username="svc"), "svc://lookup")
    said = client.get("/subjects/", {"euid": worker}).content.decode()
    assert 'It is a worker: see <a href="/workers/">Workers</a>' in said
    direct = client.get(f"/subjects/{done['hold_euid']}/")
    assert direct.status_code == 200 and "is not a subject" in direct.content.decode()
    missing = client.get("/subjects/", {"euid": "Z-EX-NOPE"})
    assert missing.status_code == 404 and "No object with that EUID" in missing.content.decode()


def test_a_subject_s_link_written_as_people_write_it_leads_to_its_page(client, lab):
    """/subjects/z-mx-2dp/ (or with a space after it) said "Z-MX-2DP is not a subject"."""
    euid = make_subject("q1", name="Tube 7")
    client = signed_in(client, lab["operator"])
    for written in (euid.lower(), f"{euid}%20", "tube%207"):
        page = client.get(f"/subjects/{written}/")
        assert page.status_code == 302 and page["Location"] == f"/subjects/{euid}/", written
    make_subject("q1", name="Tube 7")  # a name two subjects share: the choice, not a guess
    html = client.get("/subjects/tube%207/").content.decode()
    assert "is not a subject" not in html and html.count('href="/subjects/Z-') >= 2


def test_the_inspector_says_who_holds_a_claimed_item_not_that_it_is_in_no_queue(client, lab):
    euid = make_subject("q1", name="being worked on")
    svc = actor("worker_service", username="svc")
    act("claim_queue_item", svc, worker_euid=register(
        svc, "svc://extractor", capabilities=["wetlab.extraction"]),
        queue_key="q1")  # the next item: the only one
    html = signed_in(client, lab["operator"]).get(f"/subjects/{euid}/").content.decode()
    badge = html.split('id="visibility">')[1].split("</span>")[0]
    assert badge.startswith("claimed by ") and badge.endswith(" in q1"), badge
    assert "not in a queue" not in html.split("</div>")[0]
    ready = make_subject("q1", name="waiting")
    html = client.get(f"/subjects/{ready}/").content.decode()
    assert '<span class="badge ok" id="visibility">visible in q1</span>' in html


def test_an_item_held_by_a_silent_worker_is_called_stuck_with_a_way_out(client, lab):
    """A hung instrument showed offline and still holding its item for the rest of the
    claim, with nothing saying the item was stuck or how to free it."""
    make_queue("slow", lease_ttl_seconds=3600)
    make_subject("slow", name="Tube on a hung reader")
    svc = actor("worker_service", username="reader")
    worker = register(svc, heartbeat_ttl_seconds=60)
    act("claim_queue_item", svc, worker_euid=worker, queue_key="slow")
    row = lambda html: html.split(f'data-worker="{worker}"')[1].split("</tr>")[0]  # noqa: E731
    assert "stuck" not in row(signed_in(client, lab["operator"]).get("/workers/")
                              .content.decode())
    clock.advance(5 * 60)
    seen = row(client.get("/workers/").content.decode())
    assert "status-offline" in seen and "stuck: the worker is silent" in seen
    assert "end it now" not in seen  # operators: no admin link
    admin = row(signed_in(client, lab["admin"]).get("/workers/").content.decode())
    assert f'/admin/?worker={worker}">end it now</a>' in admin


def test_the_holds_list_says_how_many_items_its_holds_are_on(client, lab):
    """The dashboard's Held 6 opened "Active holds (7)": one item had two holds."""
    op = actor("operator", username="op")
    twice = make_subject("q1", name="twice held")
    for code in ("OPERATOR_HOLD", "REAGENT_ISSUE"):
        act("place_execution_hold", op, subject_euid=twice, expected_state=envelope(
            twice)["state"], payload={"hold_code": code, "reason": "check"})
    act("place_execution_hold", op, subject_euid=make_subject("q1", name="once"),
        expected_state="READY", payload={"reason": "check"})
    html = signed_in(client, lab["operator"]).get("/workbench/").content.decode()
    assert "Active holds (3, on 2 items)" in html


def test_a_lookup_that_finds_nothing_suggests_the_subjects_that_hold_it(client, lab):
    """"0148" or "Extract" said "No subject": nothing to follow but the exact name."""
    tube = make_subject("q1", name="Tube 0148 plasma")
    make_subject("q1", name="Tube 0149")
    reader = signed_in(client, lab["operator"])
    page = reader.get("/subjects/0148/")
    html = page.content.decode()
    assert page.status_code == 404 and "No subject 0148" not in html
    assert "Subjects whose name or EUID holds “0148”" in html.split("</h1>")[0]
    listed = html.split('id="like-subjects"')[1]
    assert f"/subjects/{tube}/" in listed and "Tube 0149" not in listed
    # a pattern's own characters are text: "%" and "_" match only themselves
    nothing = reader.get("/subjects/%25%25/").content.decode()
    assert 'id="like-subjects"' not in nothing and "No subject %%" in nothing
    assert 'id="like-subjects"' not in reader.get("/subjects/T_be/").content.decode()
