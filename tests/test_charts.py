"""The history charts put each bucket where its time is: a bucket's counts are what finished
from its start (its point) for its width, so its bars start at its point and stay inside the
plot, the current bucket cut at now; their scales are round values a supervisor reads off."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest

from bloomops.execution.envelope import ts
from bloomops.execution.stats.history import RANGES, History, Point, bucket_start
from bloomops.web.charts import (
    BOTTOM,
    LEFT,
    MIDDLE,
    MIN_BAR,
    REACH,
    RIGHT,
    TOP,
    count_top,
    depth_chart,
    reaches,
    seconds_top,
    throughput_chart,
)
from bloomops.web.templatetags.bloomops_ui import readable_seconds

END = datetime(2026, 11, 22, 12, 0, 30, tzinfo=UTC)
START = END - timedelta(hours=1)


def _history(points: list[Point]) -> History:
    return History(range_key="1h", start=START, end=END, width=60, queues={"q1": points},
                   lab=points)


def _xs(svg: str, pattern: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, svg)]


def test_bars_start_at_their_bucket_point_and_stay_in_the_plot():
    at = [START - timedelta(seconds=30), START + timedelta(minutes=20, seconds=-30),
          END.replace(second=0)]
    points = [Point(at=a, depth=3, completions=2, failures=1) for a in at]
    history = _history(points)
    depth = str(depth_chart(history, points, "q1", "q1"))
    bars = str(throughput_chart(history, points, "q1", "q1"))
    dots = _xs(depth, r'class="point depth" tabindex="-1" aria-hidden="true">'
                      r'<title[^>]*>[^<]*</title><circle cx="([0-9.]+)"')
    done = re.findall(r'<rect class="done" x="([-0-9.]+)" y="[^"]+" width="([0-9.]+)"', bars)
    failed = re.findall(r'<rect class="failed" x="([-0-9.]+)" y="[^"]+" width="([0-9.]+)"',
                        bars)
    assert len(dots) == len(done) == len(failed) == 3
    for dot, (x, width) in zip(dots, done, strict=True):
        assert float(x) == dot  # the bar begins where its bucket's point is
        assert LEFT <= float(x) and float(x) + float(width) <= RIGHT + 0.05
    assert [x for x, _ in failed] == [x for x, _ in done]
    # a full bucket is a minute wide; the current one ends at now
    minute = (RIGHT - LEFT) * 60 / 3600
    assert abs(float(done[1][1]) - (minute - 1)) < 0.06
    assert float(done[2][1]) < minute - 1


def _depth_runs(points: list[Point]) -> list[int]:
    svg = str(depth_chart(_history(points), points, "q1", "q1"))
    assert len(re.findall(r'class="point depth"', svg)) == len(points)
    return [len(line.split()) for line in
            re.findall(r'<polyline class="depth"[^>]* points="([^"]+)"', svg)]


def test_samples_missing_for_a_while_break_the_line_and_the_start_of_samples_is_said(settings):
    """No samples for longer than two buckets (or two recorder passes) is no data, not a
    straight line across it; one bucket missed is a pass that came late. Samples that begin
    within the range are said to begin there."""
    from bloomops.web.charts import recorded_since

    begin = START + timedelta(minutes=30)

    def at(*minutes: int) -> list[Point]:
        return [Point(at=begin + timedelta(minutes=m), depth=m) for m in minutes]

    settings.BLOOMOPS_RECORDER_INTERVAL = 10
    # minute 2 missed (bridged); minutes 5 to 7 missed (broken)
    assert _depth_runs(at(0, 1, 3, 4, 8, 9)) == [4, 2]
    # a recorder passing every 150 s: a 4-minute step is two of its passes
    settings.BLOOMOPS_RECORDER_INTERVAL = 150
    assert _depth_runs(at(0, 1, 3, 4, 8, 9)) == [6]
    history = _history(at(0, 1, 2))
    assert recorded_since(history) == begin
    assert recorded_since(_history([Point(at=START + timedelta(seconds=30))])) is None


def test_each_scale_is_round_and_its_half_is_too():
    assert [count_top(n) for n in (0, 1, 3, 5, 9, 10, 11, 299, 601, 1001)] == [
        2, 2, 4, 6, 10, 10, 20, 400, 800, 2000]
    for peak in (0, 45, 61, 3599, 3601, 4 * 3600 + 1, 29 * 3600, 9 * 86400, 40 * 86400):
        top = seconds_top(peak)
        assert top >= peak and top % 2 == 0 and readable_seconds(top // 2).count(" ") == 1
    assert seconds_top(29 * 3600) == 2 * 86400
    assert seconds_top(40 * 86400) == 42 * 86400


def test_a_supervisor_reads_the_values_off_the_scales():
    """Depth on the left (its top and half), oldest age on the right, completions above the
    middle and failures below it; the tallest point stays inside the plot; a screen reader
    is told the same."""
    points = [Point(at=START + timedelta(minutes=m), depth=d, oldest_age_seconds=a,
                    completions=c, failures=f)
              for m, d, a, c, f in ((10, 120, 1800, 7, 0), (20, 299, 29 * 3600, 33, 2))]
    history = _history(points)
    depth = str(depth_chart(history, points, "q1", "q1"))
    labels = re.findall(r'<text x="[0-9.]+" y="[0-9.]+" font-size="10" fill="([^"]+)"'
                        r' text-anchor="(start|end)">([^<]+)</text>', depth)
    assert [(side, text) for _, side, text in labels if not text.startswith("now")] == [
        ("end", "400"), ("end", "200"), ("end", "0"), ("start", "2 d"), ("start", "1 d"),
        ("start", "0")]
    assert "depth on the left scale, 0 to 400, oldest age on the right, 0 to 2 d" in depth
    ys = [float(y) for y in re.findall(r'<circle cx="[0-9.]+" cy="([0-9.]+)"', depth)]
    assert ys and TOP <= min(ys) and max(ys) <= BOTTOM
    depth_dot = re.search(r'depth 299</title><circle cx="[0-9.]+" cy="([0-9.]+)"', depth)
    assert abs(float(depth_dot.group(1)) - (BOTTOM - (BOTTOM - TOP) * 299 / 400)) < 0.06
    bars = str(throughput_chart(history, points, "q1", "q1"))
    assert [t for t in re.findall(r'font-size="10" fill="[^"]+" text-anchor="end">([^<]+)<',
                                  bars) if not t.startswith("now")] == ["40", "0", "40"]
    assert "completions up to 40 above the middle line, failures up to 40 below it" in bars


def test_oldest_age_is_dashed_and_depth_solid():
    points = [Point(at=START + timedelta(minutes=m), depth=m, oldest_age_seconds=60 * m)
              for m in (10, 11, 12)]
    svg = str(depth_chart(_history(points), points, "q1", "q1"))
    dashes = dict(re.findall(r'<polyline class="(age|depth)"[^>]* stroke-dasharray="([^"]+)"',
                             svg))
    assert dashes == {"age": "4 3", "depth": "none"}


def test_a_wide_bucket_says_its_points_are_the_highest_and_the_lab_keeps_the_range():
    """Over 24 h a point stands for a quarter hour of samples: it says it is their highest,
    the bars say their width, and the lab's points lead to the queue table in that range."""
    start = END - timedelta(hours=24)
    points = [Point(at=start + timedelta(minutes=15 * i), depth=i, oldest_age_seconds=60,
                    completions=1) for i in range(3)]
    wide = History(range_key="24h", start=start, end=END, width=900, queues={"q1": points},
                   lab=points)
    lab = str(depth_chart(wide, points, "Lab", None))
    assert re.search(r"<title[^>]*>[^<]*: highest depth 2</title>", lab)
    assert re.search(r"<title[^>]*>[^<]*: highest oldest age 1 min</title>", lab)
    assert 'href="/?range=24h#queue-table"' in lab
    assert "(bars per 15 min)" in str(throughput_chart(wide, points, "Lab", None))
    assert ">1 d ago</text>" in lab  # the time axis in words
    # the legend says it too: the last point is not the depth now
    assert "highest per 15 min: depth (max 2)" in lab
    # a minute's point is the most its passes saw: said so too
    narrow = str(depth_chart(_history(points), points, "q1", "q1"))
    assert "highest per 1 min: depth (max 2)" in narrow
    assert re.search(r"<title[^>]*>[^<]*: highest depth 2</title>", narrow)


def test_every_bar_can_be_seen_and_pointed_at_and_leads_to_the_failures_it_counts():
    """A week's hourly bars (1.7 px apart) and the bucket begun a moment ago are MIN_BAR wide
    at least; whole buckets' bars keep to their own bucket; a failure bar leads to the failed
    attempts it counts (the window of its samples), else to those of the range."""
    for range_key in ("7d", "24h"):
        span, width = RANGES[range_key]
        start = END - timedelta(seconds=span)
        ats = [bucket_start(END - timedelta(seconds=width * k), width) for k in (3, 2, 1, 0)]
        points = [Point(at=a, completions=1, failures=1, counted=(
            a - timedelta(seconds=20), a + timedelta(seconds=width - 20))) for a in ats]
        points[0].counted = None  # written by a seeding pass: no window
        history = History(range_key=range_key, start=start, end=END, width=width,
                          queues={"q1": points}, lab=points)
        svg = str(throughput_chart(history, points, "q1", "q1"))
        bars = [(float(x), float(w)) for x, w in re.findall(
            r'<rect class="failed" x="([-0-9.]+)" y="[^"]+" width="([0-9.]+)"', svg)]
        assert len(bars) == 4
        assert all(w >= MIN_BAR and LEFT <= x <= RIGHT for x, w in bars), bars
        whole = bars[:3]  # the current bucket's (cut at now) may reach MIN_BAR past it
        assert all(x + w <= nxt + 0.05 for (x, w), (nxt, _) in zip(whole, bars[1:], strict=True))
        links = re.findall(r'<a href="([^"]+)" class="point failures"', svg)
        window = [f"&since={ts(p.counted[0]).replace(':', '%3A')}"
                  f"&until={ts(p.counted[1]).replace(':', '%3A')}" for p in points[1:]]
        assert links == [html.escape(f"/failures/?queue=q1&range={range_key}{w}#attempts")
                         for w in ["", *window]]


@pytest.mark.django_db
def test_a_completion_bar_leads_to_the_completions_it_counts(client, lab):
    """Failure bars led to the attempts they counted; completion bars and the dashboard's
    Done/h led nowhere."""
    from bloomops.execution import clock
    from tests.engine import SERVICE, act, actor, claim, make_subject, register
    from tests.web_support import EXTRACTION, signed_in

    svc = actor(*SERVICE)
    worker = register(svc, capabilities=EXTRACTION, max_concurrent_leases=5)
    before = clock.now()
    done = []
    for name in ("A", "B"):
        euid = make_subject("q1", name=f"Tube {name}")
        lease = claim(svc, worker, "q1")
        act("complete_queue_execution", svc, worker_euid=worker,
            lease_euid=lease["lease_euid"], expected_state="READY", payload={})
        done.append(euid)
    clock.advance(1)
    window = (before - timedelta(seconds=1), clock.now())
    history = History(range_key="1h", start=END - timedelta(hours=1), end=END, width=60,
                      queues={}, lab=[])
    svg = str(throughput_chart(history, [Point(at=END - timedelta(minutes=1), completions=2,
                                               counted=window)], "q1", "q1"))
    [link] = re.findall(r'<a href="([^"]+)" class="point completions"', svg)
    page = signed_in(client, lab["operator"]).get(html.unescape(link)).content.decode()
    listed = re.findall(r'<tr data-record="[^"]+">\s*<td>.*?</td>\s*<td>Queue one \(q1\)</td>'
                        r'\s*<td><a href="/subjects/([^/]+)/"', page, re.S)
    assert sorted(listed) == sorted(done)
    dashboard = signed_in(client, lab["operator"]).get("/").content.decode()
    assert '/completions/?queue=q1&amp;range=1h"' in dashboard


def test_a_finger_reaches_the_nearest_bar_not_the_gap_between_bars():
    """A bar 2 px wide was all a finger could hit on a phone: each bar is reached from its
    half of the plot up to REACH past its edges, split halfway where a neighbour is nearer,
    and never past the plot."""
    boxes = [(LEFT + 2, 2.0), (LEFT + 10, 2.0), (LEFT + 100, 4.0), (RIGHT - 1, 1.5)]
    spans = reaches(boxes)
    assert spans[0] == (LEFT, LEFT + 7)  # cut by the plot's edge, then halfway to the next
    assert spans[1] == (LEFT + 7, LEFT + 12 + REACH)
    assert spans[2] == (LEFT + 100 - REACH, LEFT + 104 + REACH)
    assert spans[3][0] == RIGHT - 1 - REACH and spans[3][1] == RIGHT + 0.5  # its own bar
    for (x, w), (lo, hi) in zip(boxes, spans, strict=True):
        assert lo <= x and x + w <= hi
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # one bar a tap
    points = [Point(at=START + timedelta(minutes=m), completions=1, failures=2)
              for m in (10, 40)]
    svg = str(throughput_chart(_history(points), points, "q1", "q1"))
    failures = re.findall(r'class="point failures" tabindex="-1" aria-hidden="true">'
                          r'<title[^>]*>[^<]*</title>'
                          r'<rect class="reach" x="[^"]+" y="([^"]+)" width="[^"]+"'
                          r' height="([^"]+)"', svg)
    done = re.findall(r'class="point completions" tabindex="-1" aria-hidden="true">'
                      r'<title[^>]*>[^<]*</title>'
                      r'<rect class="reach" x="[^"]+" y="([^"]+)" width="[^"]+"'
                      r' height="([^"]+)"', svg)
    assert len(failures) == len(done) == 2
    # completions are reached above the middle line, failures below it
    assert all(float(y) == TOP and float(y) + float(h) == MIDDLE for y, h in done)
    assert all(float(y) == MIDDLE and float(y) + float(h) == BOTTOM for y, h in failures)


def test_a_charts_figures_read_as_a_table_with_the_instants_of_its_rows():
    """A screen reader was given each chart's title and highest values only; every figure
    was in the drawing. The table gives them in rows of five minutes (an hour's chart),
    gauges the highest of the row, counts summed, times written in UTC with their instants,
    which the browser says in the reader's zone as the axis's and the dashboard's."""
    from bloomops.web.charts import figures

    at = [END.replace(minute=m, second=0) - timedelta(hours=1) for m in (1, 3, 6)]
    points = [Point(at=at[0], depth=3, oldest_age_seconds=60, completions=2),
              Point(at=at[1], depth=5, oldest_age_seconds=30, completions=1, failures=1),
              Point(at=at[2], depth=2, oldest_age_seconds=600)]
    rows = figures(_history(points), points)
    assert rows == [
        {"from": "22 Nov 11:00", "to": "11:05", "depth": 5, "age": "1 min",
         "completions": 3, "failures": 1,
         "from_at": "2026-11-22T11:00:00Z", "to_at": "2026-11-22T11:05:00Z"},
        {"from": "22 Nov 11:05", "to": "11:10", "depth": 2, "age": "10 min",
         "completions": 0, "failures": 0,
         "from_at": "2026-11-22T11:05:00Z", "to_at": "2026-11-22T11:10:00Z"}]
    # the row still counting ends now (12:00:30 UTC), not at 12:05
    last = [Point(at=END.replace(second=0), depth=1)]
    assert [(r["from"], r["to"], r["to_at"]) for r in figures(_history(last), last)] == [
        ("22 Nov 12:00", "now", None)]
