"""Instants and durations in words ("3 h 12 min", "in 12 min", "14:05 UTC"), for templates
(``templatetags/bloomops_ui``) and for the sentences views and bench words compose. No
template machinery here, so any web module may use it."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone

from bloomops.execution import clock


def readable_seconds(seconds: float | None) -> str:
    """3 h 12 min, 45 s, 2 d 4 h; 2 d and 1 h when the smaller part is nothing."""
    if seconds is None:
        return "–"
    seconds = int(max(0, seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min"
    return f"{secs} s"


def exact_seconds(seconds: float) -> str:
    """Every part, none rounded away ("1 d 1 h 1 min 1 s"; fractions of a second kept): a
    setting read back in words, where readable_seconds' rounding would hide a typo."""
    whole, fraction = divmod(max(0.0, float(seconds)), 1)
    days, rest = divmod(int(whole), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    secs_words = f"{secs + fraction:g}" if fraction else str(secs)
    parts = [f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min")) if n]
    if secs or fraction or not parts:
        parts.append(f"{secs_words} s")
    return " ".join(parts)


def relative(moment: datetime, now: datetime | None = None) -> str:
    """"in 12 min", "3 h ago", "25 s ago", "just now" (under 10 s either way: a worker's
    heartbeat 29 s ago is not "just now" beside a lag of 29 s)."""
    delta = (moment - (now or clock.now())).total_seconds()
    if abs(delta) < 10:
        return "just now"
    words = readable_seconds(abs(delta))
    return f"in {words}" if delta > 0 else f"{words} ago"


def local_clock(moment: datetime, now: datetime | None = None) -> str:
    """Wall-clock time in the server's zone with the zone's name; the date too unless it is
    today, and its year unless it is this year. static/js/bloomops.js rewrites it in the
    reader's own zone."""
    local = timezone.localtime(moment)
    today = timezone.localtime(now or clock.now()).date()
    shown = (local.strftime("%H:%M") if local.date() == today
             else local.strftime("%d %b %H:%M") if local.year == today.year
             else local.strftime("%d %b %Y %H:%M"))
    return f"{shown} {local.tzname()}"


def instant_attr(moment: datetime) -> str:
    """The UTC instant as an attribute the browser reads (a <time>'s datetime, a chart's
    data-at: static/js/bloomops.js says it in the reader's zone)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
