"""Template helpers of the operator UI: idempotency keys, readable ages and humane times, the
sparkline."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from django import template
from django.template.defaultfilters import truncatechars
from django.utils.html import format_html

from bloomops.accounts.roles import ROLE_WORDS
from bloomops.execution import clock, policy, selectors
from bloomops.execution.envelope import parse_ts_or_none
from bloomops.execution.policy import DISPATCH_OWN
from bloomops.execution.results import declared_results, described, recorded
from bloomops.execution.states import RETRY_CLASS_SAID, WORKER_TYPE_WORDS
from bloomops.memo import per_request
from bloomops.text import readable_line
from bloomops.web import services
from bloomops.web.bulk import Pick
from bloomops.web.drafts import draft_key
from bloomops.web.queue_form import shown_list
from bloomops.web.timewords import (
    exact_seconds,
    instant_attr,
    local_clock,
    readable_seconds,
    relative,
)

register = template.Library()


@register.simple_tag
def new_key() -> str:
    """A fresh idempotency key, minted when the page is rendered."""
    return uuid.uuid4().hex


@register.filter
def attempt_uncounted(record: dict) -> bool:
    return policy.attempt_uncounted(record)


# The inspector's derived state in words (the code stays in its title).
DERIVED_WORDS = {"VISIBLE_IN_QUEUE": "visible in its queue", "LEASED": "claimed",
                 "LEASE_EXPIRED": "its claim ran out (lease expired, not yet swept)"}


@register.filter
def derived_words(state: str | None) -> str:
    return DERIVED_WORDS.get(state or "", state or "not visible")


@register.filter
def record_part(record: dict) -> str:
    """Which half of a step done outside a record is: its dispatch (it ended waiting for the
    result) or the outside result. Both succeed, and both are counted as done (RULES.md#metrics);
    they read alike ("attempt 1 · SUCCEEDED") twice over without this."""
    if (record.get("correlation") or {}).get("action_key") == "record_external_result":
        return "the outside result"
    if record.get("end_state") == "WAITING_EXTERNAL":
        return "dispatched; its result comes from outside"
    return ""


@register.filter
def role_words(roles) -> str:
    """Roles as their holders read them, in the order given."""
    return ", ".join(ROLE_WORDS.get(r, r) for r in roles)


@register.filter
def duration(seconds: float | None) -> str:
    return readable_seconds(seconds)


@register.filter
def age(value: datetime | str | None) -> str:
    """How long ago a timestamp (datetime or envelope text) was."""
    moment = parse_ts_or_none(value)
    if moment is None:
        return "–"
    return readable_seconds((clock.now() - moment).total_seconds())


@register.filter
def time_left(value: datetime | str | None) -> str:
    moment = parse_ts_or_none(value)
    if moment is None:
        return "–"
    left = (moment - clock.now()).total_seconds()
    return "expired" if left <= 0 else readable_seconds(left)


@register.filter
def when(value: datetime | str | None) -> str:
    """A timestamp as 2026-01-05 12:00:07 UTC: to the second, so that the actions of one
    minute read in their order (what an auditor reconstructs)."""
    moment = parse_ts_or_none(value)
    if moment is None:
        return "–"
    return _stamp(moment.astimezone(UTC))  # a value given at another offset, said in UTC


def _stamp(moment: datetime) -> str:
    """2026-01-05 12:00:07 and the zone's abbreviation (a year below 1000 padded: strftime
    leaves it short on some platforms)."""
    return f"{moment.year:04d}-" + moment.strftime("%m-%d %H:%M:%S %Z")


@register.filter
def when_in(value: datetime | str | None, zone: str | None) -> str:
    """A timestamp in the reader's time zone (an IANA name the page already checked), as
    ``when`` writes it with the zone's abbreviation, the UTC instant its title: a search of
    whole local days lists its rows in that day's clock, not at "tomorrow 02:30 UTC"."""
    moment = parse_ts_or_none(value)
    if moment is None or not zone or zone == "UTC":
        return when(value)
    return format_html('<time datetime="{}" title="{}">{}</time>',
                       instant_attr(moment), when(moment),
                       _stamp(moment.astimezone(ZoneInfo(zone))))


@register.filter
def humane(value: datetime | str | None) -> str:
    """A timestamp as a person reads it: "in 12 min (14:05 UTC)", in a <time> element whose
    title is the exact UTC instant and whose datetime the browser can read."""
    moment = parse_ts_or_none(value)  # another writer may have stored anything
    if moment is None:
        return "–"
    # how far off it was when the server wrote it, by the server's clock: the browser moves
    # the words on from there (a due time on a tablet left open read "in 20 h" all day)
    ahead = int((moment - clock.now()).total_seconds())
    return _marked(moment, format_html('<span class="ago" data-from-now="{}">{}</span>'
                                       ' <span class="local">({})</span>', ahead,
                                       relative(moment), local_clock(moment)))


@register.filter
def wall_clock(moment: datetime) -> str:
    """The wall-clock time alone ("14:05 CET"), marked as |humane's is so that the browser
    says it in the reader's own zone: for a sentence the server writes (a banner)."""
    return _marked(moment, format_html('<span class="local">{}</span>', local_clock(moment)))


def _marked(moment: datetime, shown: str) -> str:
    """A <time> the browser rewrites in the reader's zone (static/js/bloomops.js), the exact
    UTC instant its title and datetime."""
    exact = moment.astimezone(UTC)
    return format_html('<time datetime="{}" title="{}" data-humane>{}</time>',
                       instant_attr(exact), when(exact), shown)


@register.filter
def next_try(value: datetime | str | None) -> str:
    """When a retrying item may be tried again: "in 12 min (14:05 UTC)", or once that time
    has come (or none was set), "due" (its retry time, past, read as one still to come).
    Whether a worker takes it is the queue's (disabled, states offered), said on its page.
    A time no one can read is "–"."""
    moment = parse_ts_or_none(value)
    if value is not None and moment is None:
        return "–"
    if moment is None or moment <= clock.now():
        # "since 3 min ago (14:02)" in the reader's zone, as the rows beside it say theirs
        # (a UTC stamp under "in 29 s (09:02 GMT-5)" read as another hour)
        return format_html('<span class="badge ok due">due</span>{}', format_html(
            ' <span class="muted">since {}</span>', humane(moment)) if moment else "")
    return humane(moment)


# How much of a long text (a failure's words, a hold's reason) a list shows: a stack trace
# made one row screens tall. The subject's page shows the whole.
LISTED_TEXT = 200


@register.filter
def clipped(value: str | None) -> str:
    return truncatechars(value or "", LISTED_TEXT)


@register.filter
def dispatch_said(dispatch: object) -> str:
    """What a worker said of the work it sent out (``run_id: wf-1``), one short line: its own
    plain fields, not those bloomops adds; from another writer, only what reads as text."""
    if not isinstance(dispatch, dict):
        return ""
    said = [f"{readable_line(str(k))}: {readable_line(str(v))}" for k, v in dispatch.items()
            if k not in DISPATCH_OWN and isinstance(v, str | int | float)
            and not isinstance(v, bool)]
    return clipped("; ".join(said))


@register.filter
def percent(value: float | None) -> str:
    return f"{(value or 0) * 100:.0f} %"


@register.simple_tag
def sparkline(series: list[int] | None, label: str = "", empty: str = "none"):
    """A small inline SVG polyline, drawn on the server from numbers only; its accessible
    name carries the numbers. No points or only zeros: ``empty``, in words (nothing counted
    is a fact, not a gap in the data)."""
    points = list(series or [])
    if not any(points):
        return format_html('<span class="muted">{}</span>', empty)
    width, height = 120, 24
    top = max(points) or 1
    step = width / max(len(points) - 1, 1)
    coords = " ".join(
        f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(points)
    )
    return format_html(
        '<svg class="spark" width="{}" height="{}" viewBox="0 0 {} {}" role="img"'
        ' aria-label="{}"><polyline fill="none" stroke="currentColor" stroke-width="1.5"'
        ' points="{}"/></svg>',
        width, height, width, height,
        f"{label}, oldest first: {', '.join(str(v) for v in points)}", coords,
    )


@register.filter
def get_item(mapping, key):
    return (mapping or {}).get(key, "")


@register.filter
def person(username: str | None, names: dict[str, str] | None) -> str:
    """A person as people read one: "Ann Asker (ann)" when ``names`` (from
    ``signatures.display_names``) knows a name other than the username; else the username."""
    if not username:
        return ""
    name = (names or {}).get(username)
    return f"{name} ({username})" if name and name != username else username


@register.filter
def make_list_words(value: str) -> list[str]:
    return value.split()


@register.filter
def retry_words(error_class: str | None) -> str:
    """What a failure of this retry class was, in plain words; an unknown or missing class as
    it is."""
    if not error_class:
        return "Unclassified"
    return RETRY_CLASS_SAID.get(error_class, error_class)


@register.filter
def setting_value(value, name: str = "") -> str:
    """A queue setting as a person reads it: a list comma-separated, a mapping as
    "key value" pairs, yes/no, a dash for none (never a Python repr); a number of seconds
    (a setting ``name``d ``*_seconds``) also in words, "900 (15 min)"."""
    if name == "next_queue_keys" and value in (None, []):  # the two mean other things
        return "any queue" if value is None else "the default next queue alone"
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        if name == "result_fields":
            return "; ".join(described(v) for v in value) or "none"
        return shown_list([str(v) for v in value]) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {setting_value(v, k)}" for k, v in sorted(value.items())) or "–"
    return f"{value}{seconds_words(value, name)}"


@register.filter
def seconds_words(value, name: str) -> str:
    """" (15 min)" after a number of seconds a setting ``name``d ``*_seconds`` holds, for
    one at or past a minute (whose words say more than the number); else nothing."""
    if isinstance(value, str):  # as typed into a refused form
        try:
            value = float(value)
        except ValueError:
            return ""
    if not name.endswith("_seconds") or isinstance(value, bool) or not isinstance(
            value, int | float) or not 60 <= value < float("inf"):
        return ""
    return f" ({exact_seconds(value)})"


@register.filter
def is_past(value: datetime | str | None) -> bool:
    """Whether a time (a due date) has passed: what the bench marks "overdue"."""
    moment = parse_ts_or_none(value)
    return moment is not None and moment < clock.now()


@register.filter
def worker_type_words(worker_type: str | None) -> str:
    return WORKER_TYPE_WORDS.get(worker_type or "", (worker_type or "–").lower())


@register.filter
def pick_value(row) -> str:
    """A listed subject's checkbox value for a bulk action (``bulk.Pick``): its EUID with the
    state and revision the page showed, so the action refuses a subject changed since."""
    def get(name: str):
        return row.get(name) if isinstance(row, dict) else getattr(row, name, None)
    return Pick(get("subject_euid"), get("subject_state"), get("subject_revision")).encode()


@register.filter
def hold_pick_value(hold: dict) -> str:
    """A listed hold's checkbox value: its subject as the page showed it and the hold
    itself, so releasing the ticked ones ends those holds alone (RULES.md#holds)."""
    return Pick(hold["subject_euid"], hold.get("subject_state"), hold.get("subject_revision"),
                hold["euid"]).encode()


@register.simple_tag(takes_context=True)
def draft(context: template.Context, action: str, name: str = "reason") -> str:
    """What the person typed into the form posting to ``action`` before it was refused
    (web/drafts.py), on the page rendered right after the refusal only."""
    return (context.get("refused_drafts") or {}).get(draft_key(action, name), "")


def _queue_configs(context) -> dict[str, dict]:
    """Every queue's config, read once per request however many tags ask."""
    request = context.get("request")
    return per_request(request, "queue_configs", lambda: {
        q["queue_key"]: q["config"] for q in services.queues(request)})


@register.simple_tag(takes_context=True)
def recorded_result(context, record_props: dict | None) -> list[tuple[str, str]]:
    """What an attempt recorded (its result_snapshot), as people read it: its queue's result
    fields by label with their units, then anything else the worker kept (RULES.md#results);
    each value one readable line (another writer may have stored anything)."""
    props = record_props if isinstance(record_props, dict) else {}
    snapshot = props.get("result_snapshot")
    if not isinstance(snapshot, dict) or not snapshot:
        return []
    fields = declared_results(_queue_configs(context).get(props.get("queue_lookup_key") or ""))
    return [(readable_line(label), readable_line(value))
            for label, value in recorded(fields, snapshot)][:40]


@register.simple_tag(takes_context=True)
def queue_called(context, queue_key: str | None) -> str:
    """A queue as the dashboard names it, wherever a list names one (selectors.queue_called:
    "Post-extraction QC (post_extract_qc)"; workbench, failures and approvals showed the key
    alone). The queues are read once per request."""
    if not queue_key:
        return "–"
    return selectors.queue_called(queue_key, _queue_configs(context).get(queue_key))


@register.simple_tag(takes_context=True)
def claims_held(context) -> int:
    """How many items the signed-in person at the bench holds (read once per request): the
    navigation counts them, and signing out asks first while any would stay locked."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not context.get("is_human_worker"):
        return 0
    from bloomops.execution.selectors.bench import claims_held as held
    from bloomops.web.services import human_worker_key

    return per_request(request, "claims_held", lambda: held(human_worker_key(user)))


@register.filter(name="lost_clause")
def lost_clause_filter(notice: dict) -> str:
    """bench_words.lost_clause, for My work's list of claims lost."""
    from bloomops.web.bench_words import lost_clause

    return lost_clause(notice)
