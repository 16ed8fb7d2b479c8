"""The dashboard's history charts in a real browser: drawn from the recorder's samples,
named for screen readers, within the Content-Security-Policy, and their points lead to the
items behind them."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bloomops.execution import clock
from bloomops.execution.stats.recorder import record
from tests.engine import make_subject
from tests.test_browser_csp import watch_csp
from tests.test_browser_ui import browser, signed_in, site  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]


def _a_minute_of_work(name: str) -> None:
    """One more subject in q1, a minute later, and the recorder's sample of it."""
    make_subject("q1", name=name)
    clock.advance(60)
    record()


def test_a_supervisor_sees_the_charts_and_follows_a_point(browser, site):  # noqa: F811
    for n in range(3):
        _a_minute_of_work(f"Specimen chart {n}")
    page = signed_in(browser, site, "supervisor")
    refused = watch_csp(page)
    page.reload()
    lab = page.get_by_role("group", name="Lab: depth and oldest age")
    expect(lab).to_be_visible()
    chart = page.get_by_role("group", name="Queue one: depth and oldest age")
    expect(chart).to_be_visible()
    points = chart.locator("a.point.depth")
    expect(points).to_have_count(3)
    # a point leads to the items; screen readers are given the chart's title and words, not
    # sixty links a line (each hour's chart read out hundreds of them)
    expect(chart.get_by_role("link")).to_have_count(0)
    points.filter(has_text=re.compile(r": highest depth 3$")).click()
    expect(page).to_have_url(re.compile(r"/queues/q1/$"))
    expect(page.locator("tbody tr")).to_have_count(3)
    page.go_back()
    page.get_by_role("link", name="24h").click()
    expect(page.get_by_role("link", name="24h")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("group", name="Queue one: depth and oldest age")).to_be_visible()
    assert refused == []


def test_on_a_phone_a_tap_anywhere_on_the_plot_leads_to_the_items(browser, site):  # noqa: F811
    """A depth chart's dots are 6 px wide and all lead to the queue's items: on a phone a
    tap on the plot away from every dot leads there too."""
    from bloomops.web.charts import LEFT, MIDDLE, WIDTH

    _a_minute_of_work("Specimen phone chart")
    page = signed_in(browser, site, "supervisor", width=390)
    chart = page.get_by_role("group", name="Queue one: depth and oldest age")
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    unit = box["width"] / WIDTH
    # the one dot is at the plot's right end (now); this is at its left end
    page.mouse.click(box["x"] + (LEFT + 8) * unit, box["y"] + MIDDLE * unit)
    expect(page).to_have_url(re.compile(r"/queues/q1/$"))


def test_the_charts_follow_the_samples_while_the_page_stays_open(
        browser, site, settings):  # noqa: F811
    settings.BLOOMOPS_HISTORY_REFRESH_SECONDS = 1
    for n in range(2):
        _a_minute_of_work(f"Specimen open page {n}")
    page = signed_in(browser, site, "supervisor")
    refused = watch_csp(page)
    points = page.get_by_role("group", name="Queue one: depth and oldest age").locator(
        "a.point.depth")
    expect(points).to_have_count(2)
    _a_minute_of_work("Specimen open page 2")
    # no reload: the history section asks for itself again and draws the new sample
    expect(points).to_have_count(3)
    expect(points.last.locator("title")).to_have_text(re.compile(r": highest depth 3$"))
    assert refused == []


def test_a_focused_link_keeps_the_focus_while_both_panels_refresh(
        browser, site, settings):  # noqa: F811
    """The table and the charts poll on their own; when their swaps overlap, each panel's
    focused control is found again (a keyboard user is not sent back to the page's top)."""
    settings.BLOOMOPS_HISTORY_REFRESH_SECONDS = 1  # the table's poll is 1 s here too
    _a_minute_of_work("Specimen focus")
    page = signed_in(browser, site, "supervisor")
    page.evaluate("""() => { window.__swaps = 0;
        document.addEventListener('htmx:afterSettle', () => { window.__swaps += 1; }); }""")
    link = page.locator("#history nav").get_by_role("link", name="24h")
    link.focus()
    page.wait_for_function("() => window.__swaps >= 8", timeout=15000)
    assert page.evaluate("() => document.activeElement.textContent") == "24h"
    assert page.evaluate("() => document.activeElement.closest('#history') !== null")


@pytest.mark.parametrize("width", [1280, 375])
def test_every_word_of_a_chart_is_inside_it(browser, site, width):  # noqa: F811
    """The legend ran past the chart's right edge and cut off the figure a supervisor
    looks for: "oldest age (max 5 h 5"."""
    make_subject("q1", name="Specimen old", ready_at="2026-01-01T00:00:00Z")
    for n in range(2):
        _a_minute_of_work(f"Specimen legend {n}")
    page = signed_in(browser, site, "supervisor", width=width)
    page.goto(f"{site}/?range=7d")
    outside = page.evaluate("""() => [...document.querySelectorAll('svg.chart')].flatMap(svg => {
        const box = svg.getBoundingClientRect();
        return [...svg.querySelectorAll('text')].filter(t => {
            const r = t.getBoundingClientRect();
            return r.right > box.right + 0.5 || r.left < box.left - 0.5;
        }).map(t => svg.id + ': ' + t.textContent);
    })""")
    assert page.locator("svg.chart").count() >= 4 and outside == []
    assert "oldest age (max" in page.locator("svg.chart").first.text_content()
    page.context.close()


def test_a_charts_figures_open_as_a_table_and_stay_open_while_it_redraws(
        browser, site, settings):  # noqa: F811
    """The charts had no table of their values (a screen reader heard the highest only).
    The table opened stays open when the section redraws itself."""
    settings.BLOOMOPS_HISTORY_REFRESH_SECONDS = 1
    for n in range(2):
        _a_minute_of_work(f"Specimen figures {n}")
    page = signed_in(browser, site, "supervisor")
    page.get_by_text("Queue one: the figures as a table").click()
    table = page.get_by_role("table", name="Queue one, last 1h, times in UTC")
    expect(table).to_be_visible()
    expect(table.get_by_role("columnheader", name="Highest depth")).to_be_visible()
    # the latest row's highest depth (two minutes may fall in two rows of five)
    latest = table.locator("tbody tr").last.locator("td").first
    expect(latest).to_have_text("2")
    _a_minute_of_work("Specimen figures 2")
    # redrawn with the new sample, the table still open
    expect(latest).to_have_text("3")
    expect(table).to_be_visible()


def test_the_charts_say_their_times_in_the_readers_zone(
        browser, site, settings):  # noqa: F811
    """The tables beside the charts say the reader's zone; the charts' axis, points and
    figures said UTC: in Tokyo, "now (03:00 UTC)" under a table reading 12:00."""
    from zoneinfo import ZoneInfo

    settings.BLOOMOPS_HISTORY_REFRESH_SECONDS = 1
    _a_minute_of_work("Specimen in Tokyo")
    tokyo = clock.now().astimezone(ZoneInfo("Asia/Tokyo"))
    page = signed_in(browser, site, "supervisor", timezone_id="Asia/Tokyo")
    chart = page.get_by_role("group", name="Queue one: depth and oldest age")
    expect(chart.locator("text[data-clock=now]")).to_have_text(
        f"now ({tokyo:%H:%M} GMT+9)")
    point = chart.locator("a.point.depth title")
    expect(point).to_have_text(re.compile(
        rf"^{tokyo.day} {tokyo:%b} \d\d:\d\d:\d\d GMT\+9: highest depth 1$"))
    page.get_by_text("Queue one: the figures as a table").click()
    table = page.get_by_role("table", name="Queue one, last 1h, times in GMT+9")
    expect(table.get_by_role("columnheader", name="Time (GMT+9)")).to_be_visible()
    # rows of five minutes: the row this minute fell in, in Tokyo's clock
    start = tokyo.replace(minute=tokyo.minute - tokyo.minute % 5, second=0, microsecond=0)
    expect(table.locator("tbody th").last).to_have_text(
        re.compile(rf"^{start.day} {start:%b} {start:%H:%M}–"))
    # redrawn with a new sample, still in Tokyo's clock
    _a_minute_of_work("Specimen in Tokyo 2")
    expect(chart.locator("a.point.depth")).to_have_count(2)
    later = clock.now().astimezone(ZoneInfo("Asia/Tokyo"))
    expect(chart.locator("text[data-clock=now]")).to_have_text(f"now ({later:%H:%M} GMT+9)")
    expect(table.get_by_role("columnheader", name="Time (GMT+9)")).to_be_visible()
    page.context.close()
