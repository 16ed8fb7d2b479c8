"""What QA hands an auditor (docs/RULES.md#evidence): the holds a search finds, and who did
what in a period (the Activity screen), on screen and as spreadsheets. The period bundle had
been a command an admin ran; a QA lead asked "everything Quinn did in October" had no screen
to answer from."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.contrib.auth.models import User

from bloomops.execution import clock
from bloomops.execution.context import Actor
from bloomops.execution.envelope import parse_ts
from tests.engine import act, actor, make_subject
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db


def _csv(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    return list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))


def _hold(subject: str, by: str, code: str, reason: str):
    """A hold placed by ``by`` as the console places one: the actor carries the person's
    name as their account reads it then, which the action record keeps."""
    actor("operator", username=by)
    who = Actor.of(User.objects.get(username=by))
    return act("place_execution_hold", who, subject_euid=subject,
               expected_state="READY", payload={"hold_code": code, "reason": reason})


# ---------------------------------------------------------------------- holds as a spreadsheet


def test_the_holds_a_search_finds_download_as_the_screen_lists_them(client, lab):
    User.objects.update_or_create(username="qa", defaults={"first_name": "Quinn",
                                                         "last_name": "Okafor"})
    tube, other = make_subject("q1", name="Tube 7"), make_subject("q1", name="Other")
    placed = _hold(tube, "qa", "SAMPLE_QUALITY", "=HYPERLINK(\"http://x\")")
    act("release_execution_hold", actor("operator", username="lead"), subject_euid=tube,
        hold_euid=placed["hold_euid"], expected_state="HELD", payload={"reason": "respun"})
    _hold(other, "lead", "LABEL_ISSUE", "smudged")
    client = signed_in(client, lab["operator"])
    page = client.get("/holds/?code=SAMPLE_QUALITY&since=7d").content.decode()
    href = re.search(r'href="(/holds/export\.csv\?[^"]+)" id="hold-export"', page).group(1)
    rows = _csv(client.get(href.replace("&amp;", "&")))
    head, *found = rows
    assert len(found) == 1  # the search's one hold, not the LABEL_ISSUE one
    row = dict(zip(head, found[0], strict=True))
    assert row["hold_euid"] == placed["hold_euid"] and row["subject_euid"] == tube
    assert row["subject_name"] == "Tube 7" and row["hold_code"] == "SAMPLE_QUALITY"
    assert row["placed_by"] == "Quinn Okafor (qa)" and row["ended_by"] == "lead"
    assert row["end_reason"] == "respun" and row["status"] != "ACTIVE"
    assert row["queue"] == "q1" and row["placed_at_utc"].endswith("Z")
    assert row["reason"].startswith("'=")  # a spreadsheet keeps it as text, runs nothing


def test_an_instant_another_writer_stored_otherwise_is_exported_as_the_engine_writes(
        client, lab):
    """A hold's placed_at stored by another writer as "...+00:00" went into the spreadsheet
    as it was, beside the engine's "...Z" rows: one column, two forms."""
    from bloomops.tapdb.db import execute

    placed = _hold(make_subject("q1", name="Tube 9"), "qa", "SAMPLE_QUALITY", "odd clock")
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,placed_at}', '\"2026-11-20T08:15:00+00:00\"') WHERE euid = %s",
            [placed["hold_euid"]])
    rows = _csv(signed_in(client, lab["worker_human"]).get("/holds/export.csv?since=all"))
    row = dict(zip(rows[0], rows[1], strict=True))
    assert row["placed_at_utc"] == "2026-11-20T08:15:00.000000Z"
    assert row["reason"] == "odd clock"  # text that is no instant is left as it is


def test_a_holds_export_past_its_limit_says_it_is_cut(client, lab, monkeypatch):
    monkeypatch.setattr("bloomops.web.views.holds.EXPORT_LIMIT", 2)
    for n in range(3):
        _hold(make_subject("q1", name=f"T{n}"), "qa", "SAMPLE_QUALITY", f"r{n}")
    rows = _csv(signed_in(client, lab["worker_human"]).get("/holds/export.csv?since=all"))
    assert len(rows) == 1 + 2 + 1
    assert rows[-1][0].startswith("# only the newest 2 holds")


# ---------------------------------------------------------------------- who did what, when


def _october(client_user, client, query: str) -> tuple[list[str], str]:
    html = signed_in(client, client_user).get(f"/activity/?{query}").content.decode()
    count = html.split('<p id="activity-count">')[1].split("</p>")[0]
    return re.findall(r'<tr data-action="([^"]+)">', html), count


@pytest.fixture
def october(lab):
    """Quinn's and Lee's actions through October (UTC), and one on the 1st of November."""
    User.objects.update_or_create(username="qa", defaults={"first_name": "Quinn",
                                                         "last_name": "Okafor"})
    done = {}
    for moment, by, name in (("2026-09-30T23:30:00Z", "qa", "september"),
                             ("2026-10-02T09:00:00Z", "qa", "early"),
                             ("2026-10-20T14:00:00Z", "lead", "lee"),
                             ("2026-10-31T23:30:00Z", "qa", "late"),
                             ("2026-11-01T08:00:00Z", "qa", "november")):
        clock.freeze(parse_ts(moment))
        subject = make_subject("q1", name=name)
        done[name] = (subject, _hold(subject, by, "SAMPLE_QUALITY", f"held {name}"))
    clock.freeze(parse_ts("2026-11-26T10:00:00Z"))
    return done


def _record_of(hold) -> str:
    return hold.action_euid


def test_qa_finds_everything_one_person_did_in_a_month(client, lab, october):
    found, count = _october(lab["operator"], client,
                            "by=quinn&from=2026-10-01&to=2026-10-31&tz=UTC")
    assert found == [_record_of(october["late"][1]), _record_of(october["early"][1])]
    assert "2 actions from 2026-10-01 to 2026-10-31, whole days in UTC" in count
    # the reader's own days: 23:30 UTC on 30 September is 1 October in Berlin, and
    # 22:30 UTC on 31 October is 1 November there
    found, _ = _october(lab["operator"], client,
                        "by=qa&from=2026-10-01&to=2026-10-31&tz=Europe/Berlin")
    assert found == [_record_of(october["early"][1]), _record_of(october["september"][1])]
    # everyone's, narrowed by action; the subject and the why are on the row
    html = signed_in(client, lab["operator"]).get(
        "/activity/?action=place_execution_hold&from=2026-10-20&to=2026-10-20&tz=UTC"
    ).content.decode()
    row = html.split(f'data-action="{_record_of(october["lee"][1])}"')[1].split("</tr>")[0]
    assert "Place hold" in row and "held lee" in row and october["lee"][0] in row


def test_activity_downloads_with_the_sealed_records_euids(client, lab, october):
    client = signed_in(client, lab["operator"])
    rows = _csv(client.get("/activity/export.csv?by=qa&from=2026-10-01&to=2026-10-31&tz=UTC"))
    head, *found = rows
    assert [dict(zip(head, r, strict=True))["action_record_euid"] for r in found] == [
        _record_of(october["late"][1]), _record_of(october["early"][1])]
    first = dict(zip(head, found[0], strict=True))
    assert first["who"] == "Quinn Okafor (qa)" and first["action"] == "Place hold (SAMPLE_QUALITY)"
    # who did it as the record kept them: a later change of name rewrites no history
    User.objects.filter(username="qa").update(first_name="Quinn", last_name="Adeyemi")
    again = _csv(client.get("/activity/export.csv?by=qa&from=2026-10-31&to=2026-10-31&tz=UTC"))
    assert dict(zip(again[0], again[1], strict=True))["who"] == "Quinn Okafor (qa)"
    assert first["subject_euid"] == october["late"][0] and first["reason"] == "held late"
    # in the form every stored instant has (RULES.md#envelope), not Python's "+00:00"
    assert first["executed_at_utc"] == "2026-10-31T23:30:00.000000Z"
    assert first["state_after"] == "HELD" and first["queue"] == "q1"


def test_a_period_people_mistype_is_said_and_read_sensibly(client, lab, october):
    found, _ = _october(lab["operator"], client, "by=qa&from=2026-10-31&to=2026-10-01&tz=UTC")
    assert len(found) == 2  # swapped, and said so
    html = signed_in(client, lab["operator"]).get(
        "/activity/?from=October&to=2026-11-01&tz=UTC").content.decode()
    assert ("From is not a date (YYYY-MM-DD, the years 1000 to 9998): read as 6 days before"
            " To.") in html
    # a day the date picker offers but no period can end on was a 500 (its next midnight)
    for far in ("to=9999-12-31", "from=9999-12-30&to=9999-12-31", "to=0001-01-01",
                "from=0001-01-01&to=1000-01-02"):
        for path in ("/activity/", "/activity/export.csv"):
            page = signed_in(client, lab["operator"]).get(f"{path}?{far}&tz=UTC")
            assert page.status_code == 200, (path, far)
    far = signed_in(client, lab["operator"]).get(
        "/activity/?to=9999-12-31&tz=UTC").content.decode()
    assert "To is not a date (YYYY-MM-DD, the years 1000 to 9998): read as today." in far
    mars = signed_in(client, lab["operator"]).get("/activity/?tz=Mars/Base").content.decode()
    assert "No time zone is called &#x27;Mars/Base&#x27;: days are read in UTC." in mars
    assert "from 2026-10-26 to 2026-11-01" in html
    # no period: the week up to today, in the reader's days
    html = signed_in(client, lab["operator"]).get("/activity/?tz=UTC").content.decode()
    assert "from 2026-11-20 to 2026-11-26" in html
    for hostile in ("action=drop_table", "queue=%00", "by=" + "x" * 5000, "tz=Mars/Base"):
        assert signed_in(client, lab["operator"]).get(f"/activity/?{hostile}").status_code in (
            200, 400)


@pytest.mark.parametrize("role", ["worker_human", "worker_service"])
def test_only_operators_and_admins_read_the_labs_activity(client, lab, october, role):
    client = signed_in(client, lab[role])
    assert client.get("/activity/").status_code == 403
    assert client.get("/activity/export.csv?from=2026-10-01&to=2026-10-31").status_code == 403
    assert signed_in(client, lab["admin"]).get("/activity/").status_code == 200


def test_a_failure_s_words_are_its_why_on_activity_and_in_its_csv(client, lab):
    """A failure keeps its words as error_message, not reason: Activity, its CSV and My
    work's lost claims showed an empty why for every failure an auditor asked about."""
    from tests.engine import SERVICE, claim, register

    svc = actor(*SERVICE)
    subject = make_subject("q1", name="Tube 9")
    worker = register(svc, "demo://centrifuge", capabilities=["wetlab.extraction"],
                      display_name="Centrifuge adapter")
    lease = claim(svc, worker, "q1")["lease_euid"]
    act("fail_queue_execution", svc, worker_euid=worker, lease_euid=lease,
        expected_state="READY", payload={"retryable": False, "error_class": "PERMANENT_INPUT",
                                         "error_message": "Tube cracked in centrifuge"})
    client = signed_in(client, lab["operator"])
    html = client.get("/activity/?action=fail_queue_execution").content.decode()
    assert "PERMANENT_INPUT: Tube cracked in centrifuge" in html
    # which worker failed it, as the inspector says (Activity named the account alone)
    row = html.split('data-label="Who"')[1].split("</td>")[0]
    assert f"worker Centrifuge adapter <code>{worker}</code>" in row
    head, row = _csv(client.get("/activity/export.csv?action=fail_queue_execution"))[:2]
    exported = dict(zip(head, row, strict=True))
    assert exported["reason"] == "PERMANENT_INPUT: Tube cracked in centrifuge"
    assert (exported["worker_euid"], exported["worker"]) == (worker, "Centrifuge adapter")
    # the subject's own history says it once, in the same words
    page = client.get(f"/subjects/{subject}/").content.decode()
    history = page.split('id="actions"')[1].split("</table>")[0]
    failed = [r for r in history.split("<tr>") if "fail_queue_execution" in r]
    assert len(failed) == 1 and failed[0].count("PERMANENT_INPUT: Tube cracked") == 1


def test_a_hold_released_on_approval_names_who_asked_and_the_approval(client, lab):
    """The holds export put the requester's words under the approver's name, and named
    neither the requester nor the approval, which the screen does."""
    from tests.approval_support import decide, integrity_held, person, request_release

    ann = person("asker", "operator", full_name="Ann Asker")
    bob = person("checker", "operator")
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    decide(bob, approval)
    client = signed_in(client, lab["operator"])
    head, *rows = _csv(client.get("/holds/export.csv?since=7d"))
    row = next(dict(zip(head, r, strict=True)) for r in rows
               if dict(zip(head, r, strict=True))["hold_euid"] == hold)
    assert row["ended_by"] == "checker"
    assert row["end_asked_by"] == "Ann Asker (asker)" and row["end_approval_euid"] == approval


def test_activity_finds_one_subject_s_actions_without_the_workers_housekeeping(client, lab):
    """An auditor asking "who did what to this tube" had no subject filter, and a service's
    heartbeats and renewals (hundreds an hour) buried every person's decision."""
    from tests.engine import SERVICE, claim, register

    svc = actor(*SERVICE)
    make_subject("q1", name="Tube 5")
    other = make_subject("q1", name="Other")
    worker = register(svc, capabilities=["wetlab.extraction"])
    lease = claim(svc, worker, "q1")["lease_euid"]
    for _ in range(3):
        act("heartbeat_worker", svc, worker_euid=worker)
    act("renew_queue_lease", svc, worker_euid=worker, lease_euid=lease)
    _hold(other, "qa", "LABEL_ISSUE", "smudged")
    client = signed_in(client, lab["operator"])

    def keys(query: str) -> list[str]:
        head, *rows = _csv(client.get(f"/activity/export.csv?{query}"))
        return [dict(zip(head, r, strict=True))["action_key"] for r in rows]

    everyday = keys("")
    assert "heartbeat_worker" not in everyday and "renew_queue_lease" not in everyday
    assert "claim_queue_item" in everyday and "place_execution_hold" in everyday
    assert keys("housekeeping=1").count("heartbeat_worker") == 3
    assert keys("action=renew_queue_lease") == ["renew_queue_lease"]  # chosen: shown
    claimed = selectors_subject_of(lease)
    assert set(keys(f"subject={claimed}")) == {"claim_queue_item"}
    assert keys(f"subject={other}") == ["place_execution_hold"]
    page = client.get("/activity/").content.decode()
    assert "heartbeats and claim renewals left out" in page


def selectors_subject_of(lease: str) -> str:
    from bloomops.execution import selectors

    return next(x["subject_euid"] for x in selectors.leases() if x["euid"] == lease)


def test_activity_finds_a_subject_by_name_and_its_holds_by_its_queue(client, lab):
    """A hold or a cancel names no queue, so "everything in q1 this week" left them out;
    and the Subject box took only an EUID, where QA has the tube's name in hand."""
    tube = make_subject("q1", name="Tube 77")
    elsewhere = make_subject("q2", name="Tube 78")
    _hold(tube, "qa", "LABEL_ISSUE", "smudged")
    _hold(elsewhere, "qa", "LABEL_ISSUE", "torn")
    client = signed_in(client, lab["operator"])

    def rows(query: str) -> list[dict[str, str]]:
        head, *found = _csv(client.get(f"/activity/export.csv?{query}"))
        return [dict(zip(head, r, strict=True)) for r in found]

    in_q1 = rows("queue=q1&action=place_execution_hold")
    assert [r["subject_euid"] for r in in_q1] == [tube] and in_q1[0]["queue"] == "q1"
    assert [r["subject_euid"] for r in rows("subject=tube 77")] == [tube]
    assert [r["subject_euid"] for r in rows(f"subject={tube.lower()}")] == [tube]
    make_subject("q2", name="tube 77")  # a name used twice: both are meant, and it is said
    page = client.get("/activity/?subject=Tube+77").content.decode()
    assert "2 subjects are called &#x27;Tube 77&#x27;" in page


def test_activity_names_who_asked_for_what_an_approval_decided(client, lab):
    """A hold released on approval read on Activity as the approver's own act: the person
    who asked, and what they asked for, were not said."""
    from tests.approval_support import decide, integrity_held, person, request_release

    ann = person("asker2", "operator", full_name="Ann Asker")
    bob = person("checker2", "operator", full_name="Bob Checker")
    subject, hold = integrity_held(ann)
    decide(bob, request_release(ann, subject, hold)["approval_euid"])
    client = signed_in(client, lab["operator"])
    head, *rows = _csv(client.get(f"/activity/export.csv?subject={subject}"))
    rows = [dict(zip(head, r, strict=True)) for r in rows]
    decided = next(r for r in rows if r["action_key"] == "decide_approval")
    assert "checker2" in decided["who"] and decided["asked_by"] == "Ann Asker (asker2)"
    assert "release" in decided["action"].lower()
    assert decided["action"].endswith("asked by Ann Asker (asker2)")
    # the release the decision ran, recorded as the decider's, says whose request it was
    released = next(r for r in rows if r["action_key"] == "release_execution_hold")
    assert "checker2" in released["who"] and released["asked_by"] == "Ann Asker (asker2)"
    asked = next(r for r in rows if r["action_key"] == "request_approval")
    assert asked["asked_by"] == "" and "asker2" in asked["who"]
    page = client.get(f"/activity/?subject={subject}").content.decode()
    assert "asked by Ann Asker (asker2)" in page


def _rejected_then_approved(asker: str, checker: str) -> str:
    """A subject held for QC whose release Ann Asker asked for twice: Bob Checker rejected
    the first request and approved the second. Its EUID."""
    from tests.approval_support import decide, integrity_held, person, request_release

    ann = person(asker, "operator", full_name="Ann Asker")
    bob = person(checker, "operator", full_name="Bob Checker")
    subject, hold = integrity_held(ann)
    decide(bob, request_release(ann, subject, hold)["approval_euid"], "REJECTED")
    decide(bob, request_release(ann, subject, hold)["approval_euid"])
    return subject


def test_activity_says_which_way_a_decision_went(client, lab):
    """Every decision read "Decide approval: ..., asked by ...": a rejection looked exactly
    like an approval, in the page and in the spreadsheet an auditor is sent."""
    subject = _rejected_then_approved("asker3", "checker3")
    client = signed_in(client, lab["operator"])
    head, *rows = _csv(client.get(f"/activity/export.csv?subject={subject}"))
    decided = [dict(zip(head, r, strict=True))["action"] for r in rows
               if dict(zip(head, r, strict=True))["action_key"] == "decide_approval"]
    assert sorted(decided) == ["Approved: release hold, asked by Ann Asker (asker3)",
                               "Rejected: release hold, asked by Ann Asker (asker3)"]
    page = client.get(f"/activity/?subject={subject}").content.decode()
    assert "Rejected: release hold, asked by Ann Asker (asker3)" in page


def test_activity_finds_the_approvals_decided_one_way(client, lab):
    """QA asked for "every rejection this week": the Action filter offered "Decide approval"
    alone, approvals and rejections together."""
    subject = _rejected_then_approved("asker4", "checker4")
    client = signed_in(client, lab["operator"])
    page = client.get("/activity/").content.decode()
    for key, words in (("decide_approval:APPROVED", "Approved"),
                       ("decide_approval:REJECTED", "Rejected")):
        assert f'<option value="{key}">{words}</option>' in page
    for way, other in (("REJECTED", "Approved"), ("APPROVED", "Rejected")):
        head, *rows = _csv(client.get(
            f"/activity/export.csv?subject={subject}&action=decide_approval:{way}"))
        assert [dict(zip(head, r, strict=True))["action"].split(":")[0] for r in rows] == [
            way.title()], rows
        html = client.get(f"/activity/?subject={subject}&action=decide_approval:{way}")
        assert f"{other}: release hold" not in html.content.decode()
        assert "filter-note" not in html.content.decode()
    both = client.get(f"/activity/?subject={subject}&action=decide_approval").content.decode()
    assert "Approved: release hold" in both and "Rejected: release hold" in both


def test_activity_lists_its_rows_in_the_clock_of_the_days_it_searched(client, lab):
    """The search was of whole days in the reader's zone, its rows in UTC: an action at
    09:30 in Tokyo read as the day before's 00:30."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    _hold(make_subject("q1"), "qa", "LABEL_ISSUE", "smudged")
    client = signed_in(client, lab["operator"])
    page = client.get("/activity/?tz=Asia/Tokyo").content.decode()
    assert "When (Asia/Tokyo)" in page
    instant, shown = re.search(r'<td data-label="When"><time datetime="([^"]+)" title="[^"]+'
                               r' UTC">([^<]+)</time>', page).groups()
    local = datetime.fromisoformat(instant).astimezone(ZoneInfo("Asia/Tokyo"))
    assert shown == local.strftime("%Y-%m-%d %H:%M:%S JST")
    utc_page = client.get("/activity/?tz=UTC").content.decode()
    assert re.search(r'<td data-label="When">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td>', utc_page)


def test_a_first_visit_reads_whole_days_in_the_reader_s_zone(client, lab, october, settings):
    """Until the form was sent (with the zone the browser filled in), Activity read whole
    days in UTC: a Berlin QA lead's first look at "the last week" was UTC's. The browser
    says its zone on every page (a cookie); without one, the lab's zone is read."""
    client = signed_in(client, lab["operator"])
    query = "by=qa&from=2026-10-01&to=2026-10-31"
    client.cookies["bloomops_tz"] = "Europe/Berlin"
    found, count = _october(lab["operator"], client, query)
    assert "whole days in Europe/Berlin" in count
    assert found == [_record_of(october["early"][1]), _record_of(october["september"][1])]
    # the form's own zone wins over the cookie
    _, count = _october(lab["operator"], client, query + "&tz=Asia/Tokyo")
    assert "whole days in Asia/Tokyo" in count
    del client.cookies["bloomops_tz"]
    settings.TIME_ZONE = "America/New_York"
    _, count = _october(lab["operator"], client, query)
    assert "whole days in America/New_York" in count
    # a cookie naming no zone is no zone: the lab's is read (not a 500)
    client.cookies["bloomops_tz"] = "Mars/Olympus"
    _, count = _october(lab["operator"], client, query)
    assert "whole days in America/New_York" in count


def test_activity_says_an_action_it_does_not_know(client, lab):
    """/activity/?action=bogus listed every action as if none had been asked for."""
    page = signed_in(client, lab["operator"]).get("/activity/?action=bogus").content.decode()
    assert "No action &#x27;bogus&#x27;: every action is listed." in page


def test_the_dashboard_and_the_holds_search_say_a_range_they_do_not_know(client, lab):
    """/?range=5y drew the last hour and /holds/?since=yesterday searched 30 days, each
    without a word."""
    reader = signed_in(client, lab["operator"])
    assert "No range &#x27;5y&#x27;: the last 1h is shown." in reader.get(
        "/?range=5y").content.decode()
    assert "No period &#x27;yesterday&#x27;: the last 30 days are searched." in reader.get(
        "/holds/?since=yesterday").content.decode()
    assert "filter-note" not in reader.get("/?range=24h").content.decode()


def test_a_renamed_worker_leaves_the_names_its_past_actions_were_taken_under(lab):
    """A service renamed its worker by a heartbeat ("Fluorometer A (serial 1001)" to "... B
    (serial 2002)"): every past claim and failure then read as done through instrument B."""
    from bloomops.execution import selectors
    from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register

    make_queue("fluor")
    svc = actor(*SERVICE)
    worker = register(svc, "lab://fluorometer", capabilities=[],
                      display_name="Fluorometer A (serial 1001)")
    subject = make_subject("fluor")
    lease = claim(svc, worker, "fluor")
    act("fail_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": False, "error_message": "lamp out"})
    act("heartbeat_worker", svc, worker_euid=worker,
        payload={"display_name": "Fluorometer B (serial 2002)"})
    named = {a["action_key"]: a["worker_name"] for a in selectors.activity(
        subject_euids=[subject])}
    assert named == {"claim_queue_item": "Fluorometer A (serial 1001)",
                     "fail_queue_execution": "Fluorometer A (serial 1001)"}
    [beat] = selectors.activity(action_key="heartbeat_worker")
    assert beat["worker_name"] == "Fluorometer B (serial 2002)"


def test_activity_says_what_each_action_left_out(client, lab):
    """An auditor read "Place hold" without its code (QC_FAIL needs a second person to end,
    AWAITING_INFORMATION not), "Request approval" without what was asked, "Cancel approval"
    where every other page says withdrawn, "Complete execution" without where it went."""
    from tests.approval_support import integrity_held, person, request_release
    from tests.engine import SERVICE, claim, register

    ann = person("asker5", "operator", full_name="Ann Asker")
    subject, hold = integrity_held(ann)
    asked = request_release(ann, subject, hold)["approval_euid"]
    act("cancel_approval", ann, payload={"approval_euid": asked, "reason": "wrong tube"})
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=["wetlab.extraction"])
    done = make_subject("q1", name="to send on")
    lease = claim(svc, worker, "q1", subject_euid=None)
    assert lease["subject_euid"] == done
    act("complete_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"next_queue_key": "q2"})
    client = signed_in(client, lab["operator"])
    head, *rows = _csv(client.get(f"/activity/export.csv?subject={subject}"))
    said = {dict(zip(head, r, strict=True))["action_key"]: dict(zip(head, r, strict=True))[
        "action"] for r in rows}
    assert said["place_execution_hold"] == "Place hold (QC_FAIL)"
    assert said["request_approval"] == "Request approval: release hold"
    assert said["cancel_approval"] == "Withdraw approval: release hold"
    head, *rows = _csv(client.get(f"/activity/export.csv?subject={done}"))
    assert "Complete execution, sent to q2" in [
        dict(zip(head, r, strict=True))["action"] for r in rows]
