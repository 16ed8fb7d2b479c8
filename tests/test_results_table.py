"""Results over a period (docs/RULES.md#results): what one queue's step recorded, each
completed attempt of the reader's days with each declared field, every field counted over
the whole period, and the same as a spreadsheet; what QA answers "every RIN of last week" and
"how many failed QC in October" with."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bloomops.execution import clock
from bloomops.tapdb.db import execute
from tests.api_helpers import Api, api_for, error_code
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db

RESULTS = [
    {"key": "rin", "label": "RIN", "min": 1, "max": 10, "required": True},
    {"key": "conc", "label": "Concentration", "unit": "ng/µL", "min": 0},
    {"key": "qc", "label": "QC", "kind": "pass_fail", "required": True},
    {"key": "grade", "label": "Gel grade", "kind": "choice", "choices": ["A", "B"]},
    {"key": "note", "label": "Note", "kind": "text"},
]
DAY = "from=2026-11-02&to=2026-11-03&tz=UTC"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _complete(queue_key: str, name: str, when: str, result: dict, *, fail: bool = False) -> str:
    """A subject of ``queue_key`` claimed and completed (or failed) by the QC robot at
    ``when`` (UTC): the execution record's finished_at."""
    clock.freeze(_at(when))
    svc = actor(*SERVICE)
    euid = make_subject(queue_key, name=name, ready_at=_at(when))
    worker = register(svc, display_name="QC robot")
    lease = claim(svc, worker, queue_key)
    if fail:
        act("fail_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
            expected_state="READY", payload={"retryable": True, "error_message": "bioanalyzer"
                                             " offline", "error_class": "TRANSIENT_DEPENDENCY"})
    else:
        act("complete_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
            expected_state="READY", payload={"result_snapshot": result})
    return euid


@pytest.fixture
def qc_done(lab):
    """Post-extraction QC's completions: two on 2 November, one on the 3rd, one on the 10th;
    a failed attempt and another queue's completion on the 2nd, which are no QC results."""
    make_queue("qcq", display_name="Post-extraction QC", required_worker_capabilities=[],
               result_fields=RESULTS)
    make_queue("other", required_worker_capabilities=[])
    made = {
        "S1": _complete("qcq", "S1", "2026-11-02T10:00:00", {
            "rin": 8.4, "conc": 40.5, "qc": "pass", "grade": "A", "note": "=1+1"}),
        "S2": _complete("qcq", "S2", "2026-11-02T15:00:00", {
            "rin": 6.1, "conc": 12, "qc": "fail", "run_id": "R-9"}),
        "S3": _complete("qcq", "S3", "2026-11-03T09:00:00", {"rin": 9.2, "qc": "pass"}),
        "S4": _complete("qcq", "S4", "2026-11-10T09:00:00", {"rin": 7, "qc": "pass"}),
        "F1": _complete("qcq", "F1", "2026-11-02T11:00:00", {}, fail=True),
        "O1": _complete("other", "O1", "2026-11-02T12:00:00", {"rin": 1}),
    }
    clock.freeze(_at("2026-11-20T12:00:00"))
    return {**lab, **made}


def _page(client, user, query: str) -> str:
    response = signed_in(client, user).get(f"/results/?{query}")
    assert response.status_code == 200
    return response.content.decode()


def _listed(html: str) -> list[str]:
    """The subjects the table lists, in order (each row's subject link text)."""
    table = html[html.index('id="results-found"'):html.index("</table>")]
    return re.findall(r'<td data-label="Subject"><a href="/subjects/[^"]+/">([^<]+)</a>', table)


def test_the_days_completed_attempts_are_listed_newest_first_with_each_field(client, qc_done):
    html = _page(client, qc_done["worker_human"], f"queue=qcq&{DAY}")
    # the failed attempt, the other queue's completion and the 10th are not results of these
    assert _listed(html) == ["S3", "S2", "S1"]
    head = html[html.index('id="results-found"'):html.index("</thead>")]
    # the unit once, in the heading (and beside each value on a phone's card), kept whole
    assert ('<th scope="col">RIN</th><th scope="col">Concentration <span class="word">'
            '(ng/µL)</span></th><th scope="col">QC</th>') in head
    s1 = html[html.index(f'href="/subjects/{qc_done["S1"]}/"'):]
    s1 = s1[:s1.index("</tr>")]
    assert '<td data-label="Concentration (ng/µL)" class="val">40.5</td>' in s1
    assert '<td data-label="Gel grade" class="val">A</td>' in s1 and "QC robot" in s1
    s2 = html[html.index(f'href="/subjects/{qc_done["S2"]}/"'):]
    s2 = s2[:s2.index("</tr>")]
    # a key the queue does not declare is kept and shown as sent; a field not given is a dash
    assert "run_id: R-9" in s2 and '<td data-label="Gel grade" class="val">–</td>' in s2
    assert "3 completed attempts from 2026-11-02 to 2026-11-03, whole days in UTC" in html


def test_each_field_is_counted_over_the_whole_period(client, qc_done):
    html = _page(client, qc_done["operator"], f"queue=qcq&{DAY}")
    tally = html[html.index('id="results-tally"'):]
    tally = tally[:tally.index("</dl>")]
    said = dict(part.split('">', 1) for part in tally.split('<dd data-field="')[1:])
    assert said["rin"].startswith("3 recorded, 6.1 to 9.2, median 8.4, mean 7.9<")
    # what the attempts that gave none leave out is said
    assert said["conc"].startswith("2 recorded, 12 to 40.5 ng/µL, median 26.25, mean 26.25;"
                                   " 1 gave none<")
    assert said["note"].startswith("1 recorded; 2 gave none<")
    # a pass/fail's and a choice's counts lead to the attempts they count (none: no link)
    assert re.findall(r">([^<>]+)</a>", said["qc"]) == ["2 pass", "1 fail"]
    assert re.sub(r"<[^>]+>", "", said["grade"]).startswith("A: 1, B: 0; 2 gave none")
    assert "B: 0</a>" not in said["grade"]
    fails = re.search(r'href="(\?[^"]+value=fail)"', said["qc"]).group(1).replace("&amp;", "&")
    failed = _page(client, qc_done["operator"], fails)
    assert _listed(failed) == ["S2"]
    assert "1 completed attempt whose QC is fail from 2026-11-02" in failed
    assert 'id="results-said"' in failed and 'aria-current="true">1 fail</a>' in failed
    # the whole period is still counted beside the attempts listed, and says so
    assert ">2 pass</a>" in failed
    assert "Counted over all 3 completed attempts of these days, not only those listed." \
        in failed
    # a change of days keeps the value chosen
    assert '<input type="hidden" name="field" value="qc"><input type="hidden" name="value"' \
        ' value="fail">' in failed
    export = signed_in(client, qc_done["operator"]).get("/results/export.csv" + fails)
    assert [r["subject"] for r in csv.DictReader(io.StringIO(
        export.content.decode("utf-8")[1:]))] == ["S2"]


def test_a_day_is_the_readers_day_and_ends_at_its_midnight(client, qc_done):
    # Los Angeles (UTC-8): 2 November runs 08:00Z to 08:00Z the next day
    la = _page(client, qc_done["operator"], "queue=qcq&from=2026-11-02&to=2026-11-02"
               "&tz=America/Los_Angeles")
    assert _listed(la) == ["S2", "S1"]
    # Tokyo (UTC+9): S2 finished at 15:00Z, Tokyo's midnight: it is the 3rd's, not the 2nd's
    tokyo = _page(client, qc_done["operator"], "queue=qcq&from=2026-11-02&to=2026-11-02"
                  "&tz=Asia/Tokyo")
    assert _listed(tokyo) == ["S1"]
    assert "whole days in Asia/Tokyo" in tokyo
    # ... and it is the first of the 3rd's
    assert _listed(_page(client, qc_done["operator"], "queue=qcq&from=2026-11-03&to=2026-11-03"
                         "&tz=Asia/Tokyo")) == ["S3", "S2"]


def test_the_results_download_as_a_spreadsheet_by_field_key(client, qc_done):
    response = signed_in(client, qc_done["operator"]).get(f"/results/export.csv?queue=qcq&{DAY}")
    assert response.status_code == 200
    assert response["Content-Disposition"] == \
        'attachment; filename="results-qcq-2026-11-02-2026-11-03.csv"'
    text = response.content.decode("utf-8")
    assert text.startswith("\ufeff")
    rows = list(csv.DictReader(io.StringIO(text[1:])))
    # by key, a unit travelling with its column
    assert list(rows[0]) == ["finished_at_utc", "subject_euid", "subject", "attempt",
                             "worker_euid", "worker", "rin", "conc [ng/µL]", "qc", "grade",
                             "note", "other", "execution_record_euid"]
    assert [r["subject"] for r in rows] == ["S3", "S2", "S1"]
    s1 = rows[2]
    assert s1["finished_at_utc"] == "2026-11-02T10:00:00.000000Z"
    # numbers a spreadsheet adds up (the unit is the page's), a note never run as a formula
    assert (s1["rin"], s1["conc [ng/µL]"], s1["qc"], s1["grade"]) == ("8.4", "40.5", "pass",
                                                                       "A")
    assert s1["note"] == "'=1+1" and s1["worker"] == "QC robot"
    assert rows[1]["other"] == "run_id: R-9" and rows[1]["grade"] == ""


def test_a_value_another_writer_stored_otherwise_is_shown_and_not_counted_as_a_number(
        client, qc_done):
    execute("""
        UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
            '{properties,result_snapshot,rin}', '"n/a"')
        WHERE subtype = 'execution_record'
          AND json_addl->'properties'->>'subject_lookup_euid' = %(euid)s""",
                {"euid": qc_done["S3"]})
    html = _page(client, qc_done["operator"], f"queue=qcq&{DAY}")
    assert '<dd data-field="rin">2 recorded, 6.1 to 8.4, median 7.25, mean 7.25; 1 not a' \
        ' number</dd>' in html
    s3 = html[html.index(f'href="/subjects/{qc_done["S3"]}/"'):]
    assert '<td data-label="RIN" class="val">n/a</td>' in s3[:s3.index("</tr>")]


def test_the_page_reads_the_same_queries_however_many_attempts_it_lists(client, qc_done):
    reader = signed_in(client, qc_done["operator"])

    def queries(query: str) -> int:
        with CaptureQueriesContext(connection) as seen:
            assert reader.get(f"/results/?queue=qcq&{query}").status_code == 200
        return len(seen)

    assert queries("from=2026-11-03&to=2026-11-03&tz=UTC") == \
        queries("from=2026-11-01&to=2026-11-30&tz=UTC")


def test_without_a_queue_named_the_first_declaring_results_is_shown(client, qc_done):
    html = _page(client, qc_done["worker_human"], DAY)
    assert "<h1>Results of Post-extraction QC (qcq)</h1>" in html
    # a queue declaring none lists what its workers sent, and says so
    other = _page(client, qc_done["operator"], f"queue=other&{DAY}")
    assert 'id="results-undeclared"' in other and "rin: 1" in other


def test_what_cannot_be_read_is_said_and_nothing_is_listed(client, qc_done):
    html = _page(client, qc_done["operator"], "queue=nope&from=2026-13-01&to=x")
    assert "No queue is called &#x27;nope&#x27;: choose one." in html
    assert "From is not a date (YYYY-MM-DD, the years 1000 to 9998)" in html
    assert "To is not a date" in html and 'id="results-found"' not in html
    # a count asked of a field that is not a pass/fail or a choice lists every attempt
    for asked, told in (
            ("field=rin&value=8.4", "This queue declares no pass/fail or choice called 'rin'"),
            ("field=nope&value=x", "This queue declares no pass/fail or choice called 'nope'"),
            ("field=qc&value=%20", "No value of QC was given"),
            ("field=qc", "No value of QC was given"),
            ("value=fail", "A value was given without the field it is of"),
            ("to=2026-11-03junk", "To is not a date")):
        every = _page(client, qc_done["operator"], f"queue=qcq&from=2026-11-02&to=2026-11-03"
                      f"&{asked}")
        assert told.replace("'", "&#x27;") in every, asked
        assert _listed(every)[-2:] == ["S2", "S1"], asked
    # a download is what was asked for or nothing: each problem said, no file
    for asked in ("queue=nope", "queue=qcq&to=x", "queue=qcq&field=rin&value=5",
                  "queue=qcq&tz=Mars/Base"):
        export = signed_in(client, qc_done["operator"]).get(f"/results/export.csv?{asked}")
        assert export.status_code == 400 and export["Content-Type"].startswith("text/plain")
        assert b"finished_at_utc" not in export.content, asked


def test_results_are_for_the_labs_roles_only(client, qc_done, django_user_model):
    nobody = django_user_model.objects.create_user("visitor", password="x-Long-enough-1")
    for path in ("/results/?queue=qcq", "/results/export.csv?queue=qcq"):
        refused = signed_in(client, nobody).get(path)
        # the page's random tokens (CSRF, a nonce) may spell "S1" by chance: not the subject
        shown = re.sub(rb'(value|nonce|content)="[^"]*"', b"", refused.content)
        assert refused.status_code == 403 and b"S1" not in shown
    client.logout()
    assert client.get("/results/")["Location"].startswith("/accounts/login/")


def _api(user, **params):
    return api_for(user).get("/queues/qcq/results", **params)


def test_a_lims_reads_a_windows_results_and_their_counts_through_the_api(qc_done):
    answer = _api(qc_done["worker_service"], since="2026-11-02T00:00:00Z",
                  until="2026-11-03T00:00:00Z")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["attempts"], body["complete"]) == (2, True)
    assert [r["subject_name"] for r in body["results"]] == ["S2", "S1"]
    assert body["results"][1]["result"] == {"rin": 8.4, "conc": 40.5, "qc": "pass",
                                            "grade": "A", "note": "=1+1"}
    assert body["results"][1]["worker_name"] == "QC robot"
    assert body["results"][1]["attempt"] == 1
    assert [f["key"] for f in body["result_fields"]] == ["rin", "conc", "qc", "grade", "note"]
    tally = {t["key"]: t for t in body["tally"]}
    assert (tally["rin"]["given"], tally["rin"]["least"], tally["rin"]["greatest"],
            tally["rin"]["median"]) == (2, 6.1, 8.4, 7.25)
    assert tally["qc"]["values"] == {"pass": 1, "fail": 1} and tally["note"]["values"] == {}
    # the fails alone, and a limit that leaves some out says so
    fails = _api(qc_done["operator"], since="2026-11-01T00:00:00Z", field="qc", value="fail")
    assert [r["subject_name"] for r in fails.json()["results"]] == ["S2"]
    assert fails.json()["attempts"] == 1
    cut = _api(qc_done["operator"], since="2026-11-01T00:00:00+09:00", limit="2").json()
    assert (cut["attempts"], cut["complete"], len(cut["results"])) == (4, False, 2)
    # no window given: the week up to now, as the page's (the test's clock: 20 November)
    assert _api(qc_done["operator"]).json()["since"] == "2026-11-13T12:00:00.000000Z"


@pytest.mark.parametrize("params, field", [
    ({"since": "2026-11-02"}, "since"),
    ({"until": "2026-11-02T10:00:00"}, "until"),
    ({"since": "9999-01-01T00:00:00Z"}, "since"),
    ({"since": "2026-11-03T00:00:00Z", "until": "2026-11-02T00:00:00Z"}, "since"),
    ({"field": "rin", "value": "8.4"}, "field"),
    ({"field": "qc"}, "value"),
    ({"value": "fail"}, "field"),
    ({"field": "QC!", "value": "fail"}, "field"),
    ({"limit": "1001"}, "limit"),
    ({"value": " "}, "value"),
])
def test_a_window_or_filter_that_cannot_be_read_is_refused_naming_it(qc_done, params, field):
    refused = _api(qc_done["operator"], **params)
    assert refused.status_code == 400, (params, refused.content)
    assert error_code(refused) == "VALIDATION_ERROR"
    assert refused.json()["error"]["details"]["field"] == field, refused.content


def test_an_unknown_queue_or_caller_gets_no_results(qc_done, django_user_model):
    missing = api_for(qc_done["operator"]).get("/queues/nope/results")
    assert missing.status_code == 404 and error_code(missing) == "NOT_FOUND"
    nobody = django_user_model.objects.create_user("roleless")
    refused = _api(nobody)
    assert refused.status_code == 403 and error_code(refused) == "FORBIDDEN"
    assert Api().get("/queues/qcq/results").status_code == 401


def test_a_queue_s_completed_attempts_lead_to_what_they_recorded_on_their_days(client,
                                                                              qc_done):
    bar = "since=2026-11-02T00:00:00.000000Z&until=2026-11-03T00:00:00.000000Z"
    html = signed_in(client, qc_done["operator"]).get(
        f"/completions/?queue=qcq&{bar}").content.decode()
    link = re.search(r'<a href="(/results/[^"]+)" id="completions-results">([^<]+)</a>', html)
    assert link.group(2) == "What this queue's step recorded on these days (2026-11-02, whole" \
        " days)"
    assert _listed(_page(client, qc_done["operator"],
                         link.group(1).replace("&amp;", "&").split("?", 1)[1])) == ["S2", "S1"]


@pytest.mark.parametrize("params, said", [
    ({"since": "yesterday"}, "since: must be a date, time and zone, e.g. 2026-11-01T00:00:00Z"),
    ({"since": "2026-11-01T00:00:00+99:99"},
     "since: '2026-11-01T00:00:00+99:99' is not a date, time and zone."),
    ({"since": "1000-01-01T00:00:00+01:00"}, "is outside the years 1000 to 9998 (in UTC)."),
    ({"field": "QC", "value": "fail"}, "field: must be lowercase letters, digits and _"),
    ({"limit": "-1"}, "no sign, point or space"),
])
def test_an_api_refusal_says_what_a_value_must_be_in_words(qc_done, params, said):
    """A regular expression or Python's own words ("offset must be a timedelta strictly
    between ...") were the caller's only guide."""
    refused = _api(qc_done["operator"], **params)
    assert refused.status_code == 400
    assert said in refused.json()["error"]["message"], refused.json()


def test_a_median_reads_as_its_figure(qc_done):
    """The median between 6.1 and 7.3, computed in floating point, read 6.699999999999999."""
    make_queue("qc2", required_worker_capabilities=[], result_fields=RESULTS[:1])
    _complete("qc2", "S5", "2026-11-03T10:00:00", {"rin": 6.1})
    _complete("qc2", "S6", "2026-11-03T11:00:00", {"rin": 7.3})
    clock.freeze(_at("2026-11-20T12:00:00"))
    body = api_for(qc_done["operator"]).get("/queues/qc2/results",
                                            since="2026-11-03T00:00:00Z").json()
    assert body["tally"][0]["median"] == 6.7 and body["tally"][0]["mean"] == 6.7


def test_huge_numbers_and_blanks_of_any_white_space_are_counted_as_the_table_shows_them(
        client, qc_done):
    """A mean past 1e25 was a 500 (decimal rounding at 28 digits); a note of a tab alone was
    no value to the check and the table but counted as one by the tally."""
    make_queue("qc3", required_worker_capabilities=[], result_fields=RESULTS)
    _complete("qc3", "B1", "2026-11-05T10:00:00", {"rin": 5, "qc": "pass", "conc": 1e30,
                                                    "note": "\t"})
    _complete("qc3", "B2", "2026-11-05T11:00:00", {"rin": 5, "qc": "pass", "conc": 3e30,
                                                    "note": " \n "})
    clock.freeze(_at("2026-11-20T12:00:00"))
    html = _page(client, qc_done["operator"], "queue=qc3&from=2026-11-05&to=2026-11-05&tz=UTC")
    assert '<dd data-field="conc">2 recorded, 1000000000000000000000000000000 to' \
        ' 3000000000000000000000000000000 ng/µL, median 2000000000000000000000000000000,' \
        ' mean 2000000000000000000000000000000</dd>' in html
    assert '<dd data-field="note">none recorded</dd>' in html
    assert html.count('<td data-label="Note" class="val">–</td>') == 2


def test_a_bar_of_any_years_leads_to_its_days(client, qc_done):
    """The year 1 has no day west of UTC: the link to a bar's days was a 500."""
    client.cookies["bloomops_tz"] = "America/Los_Angeles"
    answer = signed_in(client, qc_done["operator"]).get(
        "/completions/?queue=qcq&since=0001-01-01T00:00:00Z&until=2026-11-03T00:00:00Z")
    assert answer.status_code == 200


@pytest.mark.parametrize("path", ["/results/?queue=qcq", "/completions/?queue=qcq",
                                  "/failures/", "/workbench/", "/admin/",
                                  # an attempt's results named, and where it may be requeued to
                                  "/subjects/{S2}/"])
def test_a_page_reads_the_queues_once_for_its_list_and_its_names(client, qc_done, monkeypatch,
                                                                 path):
    path = path.replace("{S2}", qc_done["S2"])
    """The page's own list of queues and each queue its template names were two reads of
    the same rows."""
    from bloomops.execution import selectors

    read, calls = selectors.queues, []
    monkeypatch.setattr(selectors, "queues", lambda **kw: calls.append(kw) or read(**kw))
    assert signed_in(client, qc_done["admin"]).get(path).status_code == 200
    assert len(calls) == 1
