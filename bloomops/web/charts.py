"""The dashboard's history charts, drawn on the server as SVG from the recorder's samples
(RULES.md#statistics): no script, nothing inline the Content-Security-Policy forbids. Each
chart is a named group (not an image: an image's children are hidden from screen readers, and
its points are links) with a description; each point's link is named by its own title and
leads to the items behind it where they still exist."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from bloomops.execution.envelope import ts
from bloomops.execution.stats.history import (
    LAB,
    History,
    Point,
    Window,
    bucket_end,
    bucket_start,
)
from bloomops.execution.stats.snapshot import interval_seconds
from bloomops.web.templatetags.bloomops_ui import when
from bloomops.web.timewords import instant_attr, readable_seconds

# the plot area inside a chart: two lines of legend above (one ran past the edge, its
# oldest age's maximum cut off), the time axis below, a value scale on either side
WIDTH, HEIGHT = 360, 132
LEFT, RIGHT, TOP, BOTTOM = 34, 318, 30, 116
LABEL_SIZE = 10  # the scales' and the axis's text
MIDDLE = (TOP + BOTTOM) / 2
# The tops of the time scales: each half is a round duration too.
ROUND_SECONDS = (20, 60, 120, 240, 600, 1200, 1800, 3600, 7200, 4 * 3600, 12 * 3600, 86400,
                 2 * 86400, 4 * 86400, 8 * 86400, 14 * 86400, 28 * 86400)
DEPTH, AGE, DONE, FAILED = "#1d4ed8", "#b45309", "#15803d", "#b91c1c"


def queue_url(queue_key: str | None, chart_range: str) -> str:
    """The items of a queue in order; the lab's: the queue table (the charts kept in
    ``chart_range``)."""
    if queue_key is None:
        return f"{reverse('dashboard')}?{urlencode({'range': chart_range})}#queue-table"
    return reverse("queue", args=[queue_key])


def anchor(queue_key: str | None) -> str:
    """Where a queue's charts (the lab's: None) are on the dashboard."""
    return f"charts-{queue_key or LAB}"


def history_url(queue_key: str, chart_range: str = "24h") -> str:
    """A queue's charts on the dashboard, over ``chart_range``."""
    return f"{reverse('dashboard')}?{urlencode({'range': chart_range})}#{anchor(queue_key)}"


def attempts_url(page: str, queue_key: str | None, chart_range: str, *,
                 counted: Window | None = None) -> str:
    """Where a queue's attempts went (RULES.md#statistics): the failed ones (``page``
    "failures", below what is failing now) or the completed ones ("completions") over the
    range, or those a bar counted (``counted``: finished in (from, to], a sample's window),
    each with where its subject is now; of one queue or all."""
    query = {"queue": queue_key} if queue_key else {}
    query["range"] = chart_range
    if counted is not None:
        query["since"], query["until"] = ts(counted[0]), ts(counted[1])
    return f"{reverse(page)}?{urlencode(query)}#attempts"


def _n(value: float) -> str:
    return f"{value:.1f}"


def _x(at: datetime, history: History) -> float:
    span = (history.end - history.start).total_seconds() or 1
    return LEFT + (RIGHT - LEFT) * max(0.0, (at - history.start).total_seconds()) / span


def _y(value: float, top: float, low: float = BOTTOM, high: float = TOP) -> float:
    return low - (low - high) * (value / top if top else 0)


def _runs(points: list[Point], history: History) -> list[list[int]]:
    """Indexes of the points in unbroken runs: samples missing for longer than two buckets
    or two recorder passes (the recorder was not running) break the line instead of being
    bridged by it; one missing bucket is a pass that came late."""
    gap = max(2 * history.width, 2 * interval_seconds())
    runs: list[list[int]] = []
    for i, p in enumerate(points):
        if runs and (p.at - points[i - 1].at).total_seconds() <= gap:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def count_top(peak: float) -> int:
    """The top of a count scale at or above ``peak``: 2, 4, 6, 8 or 10 times a power of ten,
    so that its half is a whole number too."""
    power = 1
    while True:
        for step in (2, 4, 6, 8, 10):
            if step * power >= peak:
                return step * power
        power *= 10


def seconds_top(peak: float) -> int:
    """The top of a time scale at or above ``peak`` (``ROUND_SECONDS``, then whole fortnights)."""
    for top in ROUND_SECONDS:
        if top >= peak:
            return top
    fortnight = ROUND_SECONDS[-1] // 2
    return -(-int(peak) // fortnight) * fortnight


def _short(n: int) -> str:
    return f"{n // 1000}k" if n >= 10_000 and n % 1000 == 0 else str(n)


def _scale(labels: tuple[tuple[str, str], ...], *, right: bool = False) -> SafeString:
    """A value scale beside the plot: (text, colour) at its top, its middle and its bottom."""
    # clear of the points drawn on the plot's edges (radius 3)
    x, side = (RIGHT + 6, "start") if right else (LEFT - 6, "end")
    return format_html_join("", '<text x="{}" y="{}" font-size="{}" fill="{}"'
                            ' text-anchor="{}">{}</text>',
                            ((x, _n(y + 3), LABEL_SIZE, colour, side, text)
                             for y, (text, colour) in zip((TOP, MIDDLE, BOTTOM), labels,
                                                          strict=True)))


def _grid(*ys: float) -> SafeString:
    """Faint lines across the plot where a scale has a label."""
    return format_html_join("", '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="currentColor"'
                            ' stroke-opacity="0.12" stroke-dasharray="2 3"/>',
                            ((LEFT, RIGHT, _n(y), _n(y)) for y in ys))


def _line(points: list[Point], history: History, value: Callable[[Point], float],
          top: float, css: str, colour: str, href: str, describe: Callable[[Point], str],
          dashed: bool = False) -> SafeString:
    coords = [(_x(p.at, history), _y(value(p), top)) for p in points]
    line = format_html_join("", '<polyline class="{}" fill="none" stroke="{}"'
                            ' stroke-width="1.5" stroke-dasharray="{}" points="{}"/>',
                            ((css, colour, "4 3" if dashed else "none",
                              " ".join(f"{_n(coords[i][0])},{_n(coords[i][1])}" for i in run))
                             for run in _runs(points, history) if len(run) > 1))
    # Out of the tab order and hidden from screen readers (the chart's title and description
    # say it in words): a chart of an hour has sixty of them per line, all leading where
    # the links beside the chart's name lead (the page's keyboard path).
    dots = format_html_join("", '<a href="{}" class="point {}" tabindex="-1" aria-hidden="true">'
                            '{}<circle cx="{}" cy="{}" r="3" fill="{}"/></a>',
                            ((href, css, _title(p.at, describe(p)), _n(x), _n(y), colour)
                             for p, (x, y) in zip(points, coords, strict=True)))
    return line + dots


def _title(at: datetime, words: str) -> SafeString:
    """A point's title: its instant (said again by the browser in the reader's zone, as the
    tables beside the charts say theirs) and what it counts."""
    return format_html('<title data-at="{}" data-clock="point">{}: {}</title>',
                       instant_attr(at), when(at), words)


def _reach(href: str, title: str) -> SafeString:
    """The plot as one link, beneath the points: every point of a depth chart leads to the
    same items, and a finger on a phone need not find a dot 6 px wide."""
    return format_html('<a href="{}" class="reach" tabindex="-1" aria-hidden="true"><title>{}'
                       '</title><rect x="{}" y="{}" width="{}" height="{}"'
                       ' fill="transparent"/></a>',
                       href, title, LEFT, TOP, RIGHT - LEFT, BOTTOM - TOP)


def _axis(history: History) -> SafeString:
    """The frame and the time axis: the range's start and now."""
    return format_html(
        '<rect x="0.5" y="0.5" width="{}" height="{}" fill="none" stroke="currentColor"'
        ' stroke-opacity="0.15"/><line x1="{}" x2="{}" y1="{}" y2="{}" stroke="currentColor"'
        ' stroke-opacity="0.3"/><text x="{}" y="{}" font-size="{}" fill="currentColor">{}'
        '</text><text x="{}" y="{}" font-size="{}" fill="currentColor" text-anchor="end"'
        ' data-at="{}" data-clock="now">now ({})</text>',
        WIDTH - 1, HEIGHT - 1, LEFT, RIGHT, BOTTOM, BOTTOM, LEFT, HEIGHT - 4, LABEL_SIZE,
        f"{readable_seconds((history.end - history.start).total_seconds())} ago", RIGHT,
        HEIGHT - 4, LABEL_SIZE, instant_attr(history.end),
        history.end.astimezone(UTC).strftime("%H:%M UTC"))


def _legend(*lines: tuple[tuple[str, str], ...]) -> SafeString:
    """Lines of (colour, words) parts above the plot, from the chart's left edge."""
    return format_html_join("", '<text x="4" y="{}" font-size="11">{}</text>', (
        (11 + 13 * i, format_html_join(" ", '<tspan fill="{}">{}</tspan>', parts))
        for i, parts in enumerate(lines)))


def _svg(chart_id: str, title: str, desc: str, body: SafeString) -> SafeString:
    return format_html(
        '<svg class="chart" id="{}" width="{}" height="{}" viewBox="0 0 {} {}" role="group"'
        ' aria-labelledby="{}-title {}-desc"><title id="{}-title">{}</title>'
        '<desc id="{}-desc">{}</desc>{}</svg>',
        chart_id, WIDTH, HEIGHT, WIDTH, HEIGHT, chart_id, chart_id, chart_id, title,
        chart_id, desc, body)


def depth_chart(history: History, points: list[Point], name: str,
                queue_key: str | None) -> SafeString:
    """Depth (solid) and oldest age (dashed, its own scale); a point links to the queue's
    items in order (the lab's: the queue table)."""
    href = queue_url(queue_key, history.range_key)
    # every point is the highest of its bucket (a minute's too: the most its passes saw),
    # said in the legend: the last point is not the depth now
    highest = "highest "
    # said once, before both series: the legend fits a phone's 360 px
    per = f"highest per {readable_seconds(history.width)}: "
    peak = max((p.depth for p in points), default=0)
    oldest = max((p.oldest_age_seconds for p in points), default=0)
    depth_top, age_top = count_top(peak), seconds_top(oldest)
    body = (_axis(history)
            + _grid(TOP, MIDDLE)
            + _scale(((_short(depth_top), DEPTH), (_short(depth_top // 2), DEPTH),
                      ("0", DEPTH)))
            + _scale(((readable_seconds(age_top), AGE), (readable_seconds(age_top // 2), AGE),
                      ("0", AGE)), right=True)
            + _legend(((DEPTH, f"{per}depth (max {peak})"),),
                      ((AGE, f"- - oldest age (max {readable_seconds(oldest)})"),))
            + _reach(href, f"{name}: its items, in order" if queue_key else "The queues")
            + _line(points, history, lambda p: p.oldest_age_seconds, age_top, "age", AGE,
                    href,
                    lambda p: f"{highest}oldest age {readable_seconds(p.oldest_age_seconds)}",
                    dashed=True)
            + _line(points, history, lambda p: p.depth, depth_top, "depth", DEPTH, href,
                    lambda p: f"{highest}depth {p.depth}"))
    return _svg(f"chart-depth-{queue_key or LAB}", f"{name}: depth and oldest age",
                f"Highest depth {peak}, highest oldest age {readable_seconds(oldest)},"
                f" over the last {history.range_key}; depth on the left scale, 0 to"
                f" {depth_top}, oldest age on the right, 0 to {readable_seconds(age_top)}.",
                body)


# A bar is at least this wide, so that a week's hourly bars (1.7 px apart) and the current
# bucket's (begun a moment ago) can be seen and pointed at.
MIN_BAR = 1.5


def bar_box(p: Point, history: History) -> tuple[float, float]:
    """Where a bucket's bar is drawn (x, width): over its bucket, from its start (its point),
    a bucket begun before the range cut at the range's start and the current one at now; a
    gap of 1 px between bars where buckets are wide enough for one; never narrower than
    MIN_BAR (a bucket cut to less is drawn that wide, past its cut)."""
    start = _x(p.at, history)
    room = _x(min(bucket_end(p.at, history.width), history.end), history) - start
    return start, max(MIN_BAR, room - 1 if room > MIN_BAR + 1 else room)


# How far past its edges a bar is reached by a finger, where no other bar is nearer.
REACH = 20


def reaches(boxes: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """For bars (x, width) in order, the span of the plot each one is reached from: up to
    REACH past its edges, split halfway where a neighbour is nearer, never past the plot. A
    tap on a phone lands on the nearest bar rather than between bars 2 px wide."""
    spans = []
    for i, (x, w) in enumerate(boxes):
        lo = max(LEFT, x - REACH)
        hi = min(RIGHT, x + w + REACH)
        if i:
            before = boxes[i - 1][0] + boxes[i - 1][1]
            lo = max(lo, min(x, (before + x) / 2))
        if i + 1 < len(boxes):
            hi = min(hi, max(x + w, (x + w + boxes[i + 1][0]) / 2))
        spans.append((min(lo, x), max(hi, x + w)))
    return spans


def throughput_chart(history: History, points: list[Point], name: str,
                     queue_key: str | None) -> SafeString:
    """Completions (bars up from the middle) and failures (bars down), each bar over its
    bucket (``bar_box``); a bar links to the attempts it counts, each with where its
    subject went (``attempts_url``)."""
    top = count_top(max((max(p.completions, p.failures) for p in points), default=0))
    mid = MIDDLE
    scale = (mid - TOP) / top
    boxes = [bar_box(p, history) for p in points]

    def bars(page: str, css: str, colour: str, count: Callable[[Point], int], said: str,
             up: bool) -> SafeString:
        """One kind of bar, each linking to the attempts it counts; a bar is reached from
        anywhere in its half of the plot nearer to it than to another (``reaches``)."""
        drawn = [(p, box) for p, box in zip(points, boxes, strict=True) if count(p)]
        half = (TOP, mid) if up else (mid, BOTTOM)
        return format_html_join(
            "", '<a href="{}" class="point {}" tabindex="-1" aria-hidden="true">{}'
                '<rect class="reach" x="{}" y="{}" width="{}" height="{}" fill="transparent"/>'
                '<rect class="{}" x="{}" y="{}" width="{}" height="{}" fill="{}"/></a>',
            ((attempts_url(page, queue_key, history.range_key, counted=p.counted), page,
              _title(p.at, f"{count(p)} {said}"), _n(lo), _n(half[0]), _n(hi - lo),
              _n(half[1] - half[0]), css, _n(x),
              _n(mid - count(p) * scale if up else mid), _n(w), _n(count(p) * scale), colour)
             for (p, (x, w)), (lo, hi) in zip(drawn, reaches([b for _, b in drawn]),
                                               strict=True)))

    done = bars("completions", "done", DONE, lambda p: p.completions, "completed", up=True)
    failed = bars("failures", "failed", FAILED, lambda p: p.failures, "failed", up=False)
    total_done = sum(p.completions for p in points)
    total_failed = sum(p.failures for p in points)
    middle = format_html('<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="currentColor"'
                         ' stroke-opacity="0.3"/>', LEFT, RIGHT, _n(mid), _n(mid))
    body = (_axis(history) + middle
            + _grid(TOP)
            + _scale(((_short(top), DONE), ("0", "currentColor"), (_short(top), FAILED)))
            + _legend(((DONE, f"completed {total_done}"), (FAILED, f"failed {total_failed}"),
                       ("currentColor", f"(bars per {readable_seconds(history.width)})")))
            + done + failed)
    return _svg(f"chart-throughput-{queue_key or LAB}", f"{name}: completions and failures",
                f"{total_done} completed and {total_failed} failed over the last"
                f" {history.range_key}; per bucket, completions up to {top} above the"
                f" middle line, failures up to {top} below it.", body)


# A chart's figures as a table (what a screen reader reads of it, and a value read exactly):
# one row per this many seconds of the range, so a week is 28 rows, not 168 hours.
TABLE_ROW_SECONDS = {"1h": 300, "24h": 3600, "7d": 6 * 3600}


def figures(history: History, points: list[Point]) -> list[dict]:
    """The chart's points in rows of TABLE_ROW_SECONDS (gauges: the highest; counts:
    summed), each row's start and end written in UTC with the instant beside it, which the
    browser says in the reader's zone, as the charts' axes and the tables above them say
    their times (UTC beside a reader's zone read as other hours)."""
    width = TABLE_ROW_SECONDS[history.range_key]
    rows: dict[datetime, dict] = {}
    for p in points:
        start = bucket_start(p.at, width)
        row = rows.setdefault(start, {"depth": 0, "age": 0.0, "completions": 0, "failures": 0})
        row["depth"] = max(row["depth"], p.depth)
        row["age"] = max(row["age"], p.oldest_age_seconds)
        row["completions"] += p.completions
        row["failures"] += p.failures
    return [{**row, "age": readable_seconds(row["age"]),
             "from": start.astimezone(UTC).strftime("%d %b %H:%M"),
             "from_at": instant_attr(start),
             # the row still counting ends now
             **({"to": end.astimezone(UTC).strftime("%H:%M"), "to_at": instant_attr(end)}
                if (end := bucket_end(start, width)) < history.end
                else {"to": "now", "to_at": None})}
            for start, row in rows.items()]


def dashboard_charts(history: History, names: dict[str, str]) -> list[dict]:
    """The lab's charts, then each queue's (in the dashboard's order, ``names``: key -> display
    name); a queue without samples in the range says so."""
    entries = [("Lab", None, history.lab)]
    entries += [(name, key, history.queues.get(key, [])) for key, name in names.items()]
    return [{"name": name, "queue_key": key, "anchor": anchor(key), "empty": not points,
             "figures": figures(history, points),
             "items_url": queue_url(key, history.range_key),
             "failures_url": attempts_url("failures", key, history.range_key),
             "failures": sum(p.failures for p in points),
             "depth": depth_chart(history, points, name, key) if points else "",
             "throughput": throughput_chart(history, points, name, key) if points else ""}
            for name, key, points in entries]


def recorded_since(history: History) -> datetime | None:
    """When the samples in the range begin, if later than the range does (a recorder
    started within it): the charts say so rather than look like a quiet start."""
    first = history.lab[0].at if history.lab else None
    return first if first and first > history.start + timedelta(seconds=history.width) else None
