"""What the dashboard, the API and /metrics read (RULES.md#statistics): the recorder's snapshot
with its time and source, the history charts drawn from its samples with links to the items,
and a dashboard whose database work does not grow with the lab once the snapshot is fresh."""

from __future__ import annotations

import re
from datetime import UTC
from html import unescape as html_unescape

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bloomops.execution import clock, selectors
from bloomops.execution.stats.recorder import record
from tests.api_helpers import api_for
from tests.engine import make_queue, make_subject
from tests.stats_support import busy_lab
from tests.test_metrics_endpoint import scrape
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db


def _lab_with_history() -> None:
    clock.freeze(clock.now())
    record()  # the recorder was running before the lab's work: every failure is sampled
    busy_lab()
    for _ in range(3):
        clock.advance(60)
        record()


def test_the_api_says_when_and_whence(tenant, users):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    api = api_for(users["operator"])
    live = api.get("/queues").json()[0]
    assert (live["source"], live["as_of"]) == ("live", clock.now().strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"))
    taken = live["as_of"]
    record()
    clock.advance(5)
    for body in (api.get("/queues").json()[0], api.get("/queues/q1").json()):
        assert (body["source"], body["as_of"]) == ("snapshot", taken)
    clock.advance(2 * settings.BLOOMOPS_RECORDER_INTERVAL)
    assert api.get("/queues/q1").json()["source"] == "live"


def test_metrics_say_how_old_the_snapshot_is(tenant, users):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])

    def stats_gauges() -> dict[str, float]:
        text = Client().get("/metrics").content.decode()
        return {m.group(1): float(m.group(2)) for m in re.finditer(
            rf'^(queue_stats_\w+)\{{tenant="{tenant}"\}} (\S+)$', text, re.M)}

    assert stats_gauges() == {"queue_stats_live": 1.0}  # never recorded: no age at all
    record()
    clock.advance(7)
    assert stats_gauges() == {"queue_stats_snapshot_age_seconds": 7.0, "queue_stats_live": 0.0}
    assert scrape()[("queue_depth", "q1")] == 0


def test_the_dashboard_reads_the_snapshot_and_says_so(client, tenant, users):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    record()
    make_subject("q1")  # after the pass: the dashboard shows the snapshot, not this
    clock.advance(1)
    html = signed_in(client, users["operator"]).get("/").content.decode()
    assert 'data-source="snapshot"' in html and "(recorded)" in html
    assert re.search(r'<td class="num depth"><a href="/queues/q1/"[^>]*>0</a>', html)
    clock.advance(2 * settings.BLOOMOPS_RECORDER_INTERVAL)
    html = client.get("/").content.decode()
    assert 'data-source="live"' in html and "(computed live)" in html
    assert re.search(r'<td class="num depth"><a href="/queues/q1/"[^>]*>1</a>', html)


def test_each_number_links_to_the_items_behind_it(client, tenant, users):
    _lab_with_history()
    html = signed_in(client, users["operator"]).get("/").content.decode()
    row = re.search(r'<tr data-queue="q2".*?</tr>', html, re.S).group(0)
    # each count opens its own part of the workbench (both led to its top)
    assert 'href="/workbench/?queue=q2#h-holds" aria-label="1 held in q2"' in row
    row = re.search(r'<tr data-queue="q1".*?</tr>', html, re.S).group(0)
    assert 'href="/workbench/?queue=q1#h-dead" aria-label="1 dead letters of q1"' in row
    # the failure rate: the hour's failed attempts themselves, shown on narrow screens too
    assert ('href="/failures/?queue=q1&amp;range=1h#attempts"'
            ' aria-label="2 of 3 attempts failed in q1"') in row
    assert '<th scope="col" class="num" title="Attempts that succeeded' in html


def test_charts_are_drawn_from_the_samples_with_links(client, tenant, users):
    _lab_with_history()
    client = signed_in(client, users["operator"])
    html = client.get("/").content.decode()
    assert 'id="no-samples"' not in html
    for chart in ("_lab", "q1", "q2"):
        assert f'<svg class="chart" id="chart-depth-{chart}"' in html
        assert f'aria-labelledby="chart-depth-{chart}-title chart-depth-{chart}-desc"' in html
    # one point per recorded minute in the last hour, each linked to the queue's items
    q1_points = re.findall(r'<a href="/queues/q1/" class="point depth" tabindex="-1"'
                           r' aria-hidden="true">', html)
    assert len(q1_points) == 3
    assert re.search(r'<title[^>]*>[^<]*: highest depth 3</title>', html)
    assert '<title id="chart-throughput-q1-title">q1: completions and failures</title>' in html
    # failures link to where the queue's failures went: a bar to the failed attempts of its
    # bucket, the link beside the chart to those of the range
    failures = "/failures/?queue=q1&amp;range=1h#attempts"
    bars = re.findall(r'<a href="(/failures/\?queue=q1&amp;range=1h&amp;since=[^"]+)"'
                      r' class="point failures" tabindex="-1" aria-hidden="true">', html)
    assert bars
    in_bars = sum(client.get(html_unescape(b)).content.decode().split('id="attempts"')[1]
                  .count("<tr data-record=") for b in bars)
    assert in_bars == 2  # what the bars counted
    # from the keyboard: the links beside the chart's name (the points are out of tab order)
    caption = html.split('id="charts-q1"')[1].split("</figcaption>")[0]
    assert '<a href="/queues/q1/">q1</a>' in caption
    assert f'<a href="{failures}" class="chart-failures">2 failed attempts' in caption
    attempts = client.get("/failures/", {"queue": "q1", "range": "1h"}).content.decode()
    listed = attempts.split('id="failed-attempts"')[1].split("</table>")[0]
    assert listed.count("<tr data-record=") == 2  # what the chart counted
    assert "failed for good" in listed and "failed, to be retried" in listed
    assert 'aria-current="page">1h</a>' in html
    # a queue's page leads to its charts
    queue_page = client.get("/queues/q1/").content.decode()
    assert 'href="/?range=24h#charts-q1" id="queue-history"' in queue_page
    assert '<figure class="chart-pair" id="charts-q1"' in html
    for r in ("24h", "7d"):
        page = client.get("/", {"range": r}).content.decode()
        assert f'aria-current="page">{r}</a>' in page and 'id="chart-depth-q1"' in page
    assert 'aria-current="page">1h</a>' in client.get("/", {"range": "1y"}).content.decode()


def test_the_charts_redraw_themselves_with_each_new_sample(client, tenant, users):
    """A supervisor leaves the dashboard open: the history section asks for itself again
    every minute, in the range chosen, and the answer is that section alone with the
    samples taken since (a poll, which does not keep an idle session alive)."""
    _lab_with_history()
    client = signed_in(client, users["operator"])
    page = client.get("/", {"range": "24h"}).content.decode()
    section = re.search(r'<section id="history"[^>]*>', page).group(0)
    assert 'hx-get="/?range=24h&amp;part=history"' in section
    assert 'hx-trigger="every 60s"' in section and "data-poll" in section
    def poll(chart_range: str) -> str:
        return client.get("/", {"range": chart_range, "part": "history"},
                          HTTP_HX_REQUEST="true", HTTP_X_BLOOMOPS_POLL="1").content.decode()

    assert 'aria-current="page">24h</a>' in poll("24h")
    before = poll("1h")  # a point a minute
    assert before.startswith('<section id="history"') and 'id="queue-table"' not in before
    clock.advance(60)
    record()
    after = poll("1h")
    points = 'class="point depth"'
    assert after.count(points) == before.count(points) + 3  # the lab, q1 and q2
    # the charts' poll reads the samples and the queues' names, never the summaries, even
    # when the snapshot is old and the table's own poll would compute them live
    clock.advance(3600)
    with CaptureQueriesContext(connection) as polled:
        poll("1h")
    assert not [q["sql"] for q in polled.captured_queries if "summaries" in q["sql"]]
    # the queue table's own poll still answers with the table alone
    panel = client.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert panel.startswith('<section id="dashboard-panel"') and 'id="history"' not in panel


def test_no_samples_yet_is_said_plainly(client, tenant, users):
    make_queue("q1", required_worker_capabilities=[])
    html = signed_in(client, users["operator"]).get("/").content.decode()
    assert 'id="no-samples"' in html and "<svg class=\"chart\"" not in html


def _dashboard_statements(client) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/").status_code == 200
    return _normalised(queries.captured_queries)


def _normalised(captured: list[dict]) -> list[str]:
    """The statements' text, whatever the values bound to them."""
    return [re.sub(r"'[^']*'|\b\d+(\.\d+)?\b|\"s\d+_x\d+\"", "?", q["sql"])
            for q in captured]


def test_a_fresh_snapshot_makes_the_dashboard_independent_of_the_labs_size(
        client, tenant, users):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    make_subject("q1")
    clock.advance(1)
    record()
    client = signed_in(client, users["operator"])
    client.get("/")  # session and caches warm
    small = _dashboard_statements(client)
    for n in range(40):
        make_subject("q1", name=f"more{n}")
    clock.advance(60)
    record()
    large = _dashboard_statements(client)
    assert small == large
    # No subject is read: the snapshot row and the samples, and beside them only the count
    # of approvals waiting in the navigation (a read of approvals, not of subjects).
    with CaptureQueriesContext(connection) as waiting:
        selectors.approvals_waiting(for_user=users["operator"].get_username())
    tapdb = [s for s in large if "generic_instance" in s or s.startswith("EXECUTE ")]
    assert tapdb == _normalised(waiting.captured_queries)


def test_a_queue_made_after_the_snapshot_is_found_live_and_an_unknown_one_is_404(
        tenant, users):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    record()
    make_queue("q9", required_worker_capabilities=[])
    api = api_for(users["operator"])
    assert [q["queue_key"] for q in api.get("/queues").json()] == ["q1"]  # as of the snapshot
    body = api.get("/queues/q9").json()
    assert (body["queue_key"], body["source"]) == ("q9", "live")
    missing = api.get("/queues/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"


def test_the_bench_measures_the_dashboard_with_a_fresh_snapshot(tenant, users):
    from bloomops.bench.dashboard import dashboard_db_time
    from bloomops.execution.models import QueueSnapshot

    make_queue("q1", required_worker_capabilities=[])
    assert dashboard_db_time(runs=1) > 0
    assert QueueSnapshot.objects.count() == 1  # it recorded first, so the view read that


def test_the_dashboard_says_when_the_recorder_is_not_running(client, tenant, users):
    """Operators are told the recorder is silent (never ran, or its last snapshot is older
    than twice its interval), with when it last stored figures; not while it runs."""
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[])
    operator = signed_in(client, users["operator"])
    html = operator.get("/").content.decode()
    assert 'id="recorder-silent"' in html and "has not run yet" in html
    record()
    assert 'id="recorder-silent"' not in operator.get("/").content.decode()
    taken = clock.now()
    clock.advance(3 * settings.BLOOMOPS_RECORDER_INTERVAL)
    html = operator.get("/").content.decode()
    assert 'id="recorder-silent"' in html
    # when, as the page's other times say it: how long ago, the clock in the reader's zone
    said = html.split('id="recorder-silent"')[1].split("</p>")[0]
    assert "last stored figures <time" in said and "30 s ago" in said
    assert f"{taken.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" in said  # exact, on hover
    # a recorder running at a longer interval than this process's setting is judged by its own
    record(interval=60)
    clock.advance(30)
    html = operator.get("/").content.decode()
    assert 'data-source="snapshot"' in html and 'id="recorder-silent"' not in html
    client.logout()
    bench = signed_in(client, users["worker_human"]).get("/").content.decode()
    assert 'id="recorder-silent"' not in bench


@pytest.mark.usefixtures("committed")
def test_live_figures_are_computed_one_at_a_time(tenant, monkeypatch):
    """With the recorder behind, every scrape and dashboard computed the statistics live at
    once; a reader now waits while another process computes them, for a while at most, and
    then answers anyway (here: the turn held elsewhere)."""
    from bloomops.execution.stats import snapshot
    from bloomops.execution.stats.counting import tenant_key
    from tests.engine import locked_elsewhere

    make_queue("q1")
    name = f"bloomops-live-stats|{tenant_key(None)}"

    def turns(queries) -> tuple[int, int]:
        sql = [q["sql"] for q in queries.captured_queries]
        return (sum("pg_try_advisory_lock" in q for q in sql),
                sum("pg_advisory_unlock" in q for q in sql))

    with CaptureQueriesContext(connection) as free:
        assert snapshot.current().source == snapshot.LIVE
    assert turns(free) == (1, 1)  # its turn at once, and given back

    def hold() -> None:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])

    monkeypatch.setattr(snapshot, "LIVE_TURN_WAIT_SECONDS", 0.3)
    with locked_elsewhere(hold), CaptureQueriesContext(connection) as busy:
        assert snapshot.current().source == snapshot.LIVE  # answered all the same
    tries, released = turns(busy)
    assert tries > 1 and released == 0  # it waited for the turn, and never had it
