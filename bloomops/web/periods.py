"""A period of whole days a reader asks for (a form's ``from``, ``to`` and ``tz``), read in
their time zone as the holds' "today" is: Activity's and Results' periods. What QA answers an
auditor with is "October", and October is the lab's days, not UTC's."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from django.conf import settings
from django.http import HttpRequest

from bloomops.execution import clock
from bloomops.execution.envelope import YEARS

# The reader's zone as their browser last said it: static/js/bloomops.js sets this cookie on
# every page, so a page's first visit (before its form sends "tz") reads the reader's days.
ZONE_COOKIE = "bloomops_tz"


@cache
def known_zones() -> frozenset[str]:
    """The zones this machine's time zone database holds, read once: each read walks the
    whole database (about 14 ms), and a page of days asked it twice."""
    return frozenset(available_timezones())


def reader_zone(request: HttpRequest) -> str:
    """The zone the reader asked for (the form's "tz": one that does not exist is said, and
    local_midnight reads UTC), else their browser's (the cookie, where it names a zone), else
    the lab's (BLOOMOPS_TIME_ZONE)."""
    if asked := request.GET.get("tz", "").strip()[:64]:
        return asked
    told = request.COOKIES.get(ZONE_COOKIE, "").strip()[:64]
    return told if told in known_zones() else settings.TIME_ZONE


def local_midnight(now: datetime, zone_name: str) -> tuple[datetime, str]:
    """The last midnight in the reader's time zone (the IANA name their browser gives,
    static/js/bloomops.js), and the zone's name; UTC when none or no such zone is named.
    "Today" is the reader's day: a QA lead in Honolulu and one in Berlin mean different
    instants."""
    name = zone_name if zone_name in known_zones() else "UTC"
    local = now.astimezone(ZoneInfo(name))
    return local.replace(hour=0, minute=0, second=0, microsecond=0), name


@dataclass(frozen=True)
class Days:
    first: date
    last: date
    zone: str
    problems: list[str] = field(default_factory=list)

    @property
    def since(self) -> datetime:
        """The first day's midnight in the zone."""
        return datetime.combine(self.first, time(0), tzinfo=ZoneInfo(self.zone))

    @property
    def until(self) -> datetime:
        """The midnight ending the last day (the period is [since, until))."""
        return datetime.combine(self.last + timedelta(days=1), time(0),
                                tzinfo=ZoneInfo(self.zone))


def _day(text: str) -> date | None:
    """A day people can mean: the engine's years (a day of 9999 has no next midnight)."""
    # the whole text: "2026-11-26junk" is no day (it was read as the 26th)
    try:
        day = date.fromisoformat(text.strip()) if text.strip() and len(text) <= 40 else None
    except ValueError:
        return None
    return day if day is None or YEARS[0] <= day.year <= YEARS[1] else None


def days_asked(request: HttpRequest, default_days: int) -> Days:
    """The days ``from`` and ``to`` name (either left out: the ``default_days`` up to the
    reader's today), each problem said: a day that is none, a zone that is none (UTC read),
    the two swapped."""
    get = request.GET
    asked_zone = get.get("tz", "").strip()[:64]
    today, zone = local_midnight(clock.now(), reader_zone(request))
    problems = [f"{label} is not a date (YYYY-MM-DD, the years {YEARS[0]} to {YEARS[1]}):"
                f" read as {default}."
                for label, name, default in (("From", "from", f"{default_days - 1} days before To"),
                                             ("To", "to", "today"))
                if get.get(name, "").strip() and _day(get[name]) is None]
    if asked_zone and zone != asked_zone:
        problems.append(f"No time zone is called {asked_zone!r}: days are read in UTC.")
    last = _day(get.get("to", "")) or today.date()
    first = _day(get.get("from", "")) or max(last - timedelta(days=default_days - 1),
                                             date(YEARS[0], 1, 1))
    if first > last:
        problems.append("From is after To: the two are swapped.")
        first, last = last, first
    return Days(first, last, zone, problems)


def days_spanning(since: datetime, until: datetime, request: HttpRequest) -> tuple[date, date]:
    """The reader's days an instant range falls on (a chart's last 24 h: yesterday and
    today), for a page of whole days it leads to."""
    zone = ZoneInfo(local_midnight(until, reader_zone(request))[1])
    # the range ends before ``until``: one ending at midnight is the day before's
    last = max(since, until - timedelta(microseconds=1))
    return since.astimezone(zone).date(), last.astimezone(zone).date()
