"""The history charts put each bucket where its time is: a bucket's counts are what finished
from its start (its point) for its width, so its bars start at its point and stay inside the
plot, the current bucket cut at now."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from bloomops.execution.stats.history import History, Point
from bloomops.web.charts import LEFT, RIGHT, depth_chart, throughput_chart

END = datetime(2026, 11, 22, 12, 0, 30, tzinfo=UTC)
START = END - timedelta(hours=1)


def _history(points: list[Point]) -> History:
    return History(range_key="1h", start=START, end=END, width=60, queues={"q1": points},
                   lab=points)


def _xs(svg: str, pattern: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, svg)]


def test_bars_start_at_their_bucket_point_and_stay_in_the_plot():
    at = [START - timedelta(seconds=30), START + timedelta(minutes=20),
          END.replace(second=0)]
    points = [Point(at=a, depth=3, completions=2, failures=1) for a in at]
    history = _history(points)
    depth = str(depth_chart(history, points, "q1", "q1"))
    bars = str(throughput_chart(history, points, "q1", "q1"))
    dots = _xs(depth, r'class="point depth" tabindex="-1"><title>[^<]*</title>'
                     r'<circle cx="([0-9.]+)"')
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
