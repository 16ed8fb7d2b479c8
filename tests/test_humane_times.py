"""Humane times (the |humane filter): relative words a person reads at a glance, the wall
clock with its zone, the exact UTC instant on hover, in a machine-readable <time>."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bloomops.execution import clock
from bloomops.execution.envelope import parse_ts_or_none
from bloomops.web.templatetags.bloomops_ui import humane, readable_seconds, setting_value

NOW = datetime(2026, 11, 22, 9, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def frozen():
    clock.freeze(NOW)


@pytest.mark.parametrize(("value", "words", "local"), [
    ("2026-11-22T09:12:00.000000Z", "in 12 min", "(09:12 UTC)"),
    ("2026-11-22T06:00:00Z", "3 h ago", "(06:00 UTC)"),
    ("2026-11-22T05:48:00+00:00", "3 h 12 min ago", "(05:48 UTC)"),
    ("2026-11-22T09:00:09Z", "just now", "(09:00 UTC)"),
    ("2026-11-22T08:59:31Z", "29 s ago", "(08:59 UTC)"),
    ("2026-11-19T09:00:00Z", "3 d ago", "(19 Nov 09:00 UTC)"),
    (datetime(2026, 11, 22, 10, 0, tzinfo=UTC), "in 1 h", "(10:00 UTC)"),
    # another year says its year: 29 Feb 2024 read as a date of this year
    ("2024-02-29T00:00:00Z", "997 d 9 h ago", "(29 Feb 2024 00:00 UTC)"),
])
def test_relative_words_and_the_wall_clock_with_its_zone(value, words, local):
    html = str(humane(value))
    assert f">{words}</span> <span class=\"local\">{local}</span>" in html
    # how far off, by the server's clock, for the browser to move the words on from
    moment = value if isinstance(value, datetime) else parse_ts_or_none(value)
    ahead = int((moment - NOW).total_seconds())
    assert f'<span class="ago" data-from-now="{ahead}">{words}</span>' in html


def test_the_exact_utc_instant_is_the_title_and_the_datetime():
    html = str(humane("2026-11-22T11:53:16.726151+02:00"))
    assert html.startswith('<time datetime="2026-11-22T09:53:16Z"'
                           ' title="2026-11-22 09:53:16 UTC" data-humane>')
    assert "726151" not in html  # never the raw stored text


@pytest.mark.parametrize("value", [None, "", "not a time"])
def test_no_time_is_a_dash(value):
    assert humane(value) == "–"


def test_settings_read_as_words_not_python():
    from bloomops.web.templatetags.bloomops_ui import setting_value

    assert setting_value(["wetlab.extraction", "wetlab.qc"]) == "wetlab.extraction, wetlab.qc"
    assert setting_value({"mode": "EXPONENTIAL_BACKOFF", "initial_delay_seconds": 30}) == (
        "initial_delay_seconds 30, mode EXPONENTIAL_BACKOFF")
    assert setting_value(None) == "–" and setting_value(True) == "yes"
    assert setting_value([]) == "none" and setting_value(1200) == "1200"


def test_worker_types_read_as_words():
    from bloomops.web.templatetags.bloomops_ui import worker_type_words

    assert [worker_type_words(t) for t in ("SERVICE", "HUMAN_SESSION", "INSTRUMENT_ADAPTER",
                                           "ROBOT", None)] == [
        "service", "person", "instrument", "robot", "–"]


@pytest.mark.parametrize(("seconds", "words"), [
    (45, "45 s"), (120, "2 min"), (3600, "1 h"), (3720, "1 h 2 min"), (2 * 86400, "2 d"),
    (90000, "1 d 1 h"), (-5, "0 s"), (None, "–"),
])
def test_durations_read_without_a_zero_part(seconds, words):
    assert readable_seconds(seconds) == words


def test_an_exact_time_given_at_another_offset_is_said_in_utc():
    """A window given as 05:00+05:00 was headed "05:00:00 UTC" (the offset dropped)."""
    from bloomops.web.templatetags.bloomops_ui import when

    assert when("2026-11-26T05:00:00+05:00") == "2026-11-26 00:00:00 UTC"
    assert when(datetime(1000, 1, 1, tzinfo=UTC)) == "1000-01-01 00:00:00 UTC"


@pytest.mark.parametrize(("value", "name", "words"), [
    (900, "lease_ttl_seconds", "900 (15 min)"),
    (90, "lease_ttl_seconds", "90 (1 min 30 s)"),  # not rounded to "1 min"
    (90061, "straggler_threshold_seconds", "90061 (1 d 1 h 1 min 1 s)"),
    (86400, "max_delay_seconds", "86400 (1 d)"),
    (90.5, "initial_delay_seconds", "90.5 (1 min 30.5 s)"),
    (45, "lease_ttl_seconds", "45"),  # under a minute the number says it all
    (900, "dispatch_priority", "900"),  # not a number of seconds
    ({"initial_delay_seconds": 120, "backoff_factor": 2.0},
     "retry_policy", "backoff_factor 2.0, initial_delay_seconds 120 (2 min)"),
])
def test_a_setting_of_seconds_reads_in_words_too(value, name, words):
    """A queue setting's preview says what a number of seconds is, exactly: a typo of a
    factor of ten reads as one (docs/RULES.md#queue-configuration)."""
    assert setting_value(value, name) == words


def test_the_lab_s_zone_is_the_wall_clock_of_the_server_s_sentences(settings):
    """A banner said "until 17:48 UTC" to a lab in Berlin: BLOOMOPS_TIME_ZONE sets the zone
    of the times the server writes (the exact instant stays UTC)."""
    settings.TIME_ZONE = "Europe/Berlin"
    html = str(humane("2026-11-22T09:12:00Z"))
    assert '<span class="local">(10:12 CET)</span>' in html
    assert 'title="2026-11-22 09:12:00 UTC"' in html
