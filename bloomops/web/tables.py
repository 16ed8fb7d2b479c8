"""django-tables2 tables of the operator UI. Rows come from selectors that page in SQL, so a
table gets one page of rows and the total (``SqlPage``), never the whole queue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import django_tables2 as tables
from django.utils.html import format_html
from django_tables2.data import TableListData

from bloomops.web.templatetags.bloomops_ui import age, humane, is_past

PER_PAGE = 25


class SqlPage(Sequence):
    """A sequence as long as the selector's total that holds only the fetched page."""

    def __init__(self, rows: list[Any], total: int, offset: int) -> None:
        self.rows, self.total, self.offset = rows, total, offset

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, key):
        if isinstance(key, slice):
            start = (key.start or 0) - self.offset
            stop = (key.stop if key.stop is not None else self.total) - self.offset
            return self.rows[max(start, 0):max(stop, 0)]
        return self.rows[key - self.offset]


def sql_page_data(rows: list[Any], total: int, offset: int) -> TableListData:
    return TableListData(SqlPage(rows, total, offset))


# The class and the number within it: two ROUTINE items are in the order of their numbers.
PRIORITY_BADGE = (
    '<span class="prio"><span class="badge prio-{{ record.priority_class|lower }}">'
    '{{ record.priority_class }}</span> <span class="prio-number">{{ record.priority }}</span>'
    '</span>'
)
SUBJECT_LINK = (
    '<a href="{% url \'subject\' record.euid %}"><code>{{ record.euid }}</code></a>'
)
# A row outside the signed-in person's own scopes, or behind a strict queue's head, says
# so instead (views/queues.py).
CLAIM_BUTTON = """{% load bloomops_ui %}{% if record.out_of_scope %}
<span class="muted not-yours">Not yours: {{ record.out_of_scope }}</span>
{% elif record.after_head %}
<span class="muted in-order">In order: {{ record.after_head }}</span>{% else %}
<form method="post" action="{% url 'claim_subject' record.euid %}" class="inline">
{% csrf_token %}<input type="hidden" name="idempotency_key" value="{% new_key %}">
<input type="hidden" name="expected_state" value="{{ record.state }}">
<input type="hidden" name="expected_revision" value="{{ record.revision }}">
<input type="hidden" name="next" value="{{ request.get_full_path }}">
<button type="submit" aria-label="Claim {{ record.euid }}">Claim</button></form>{% endif %}"""


OPTIONAL = {"th": {"class": "opt"}, "td": {"class": "opt"}}


class SubjectRowsTable(tables.Table):
    """Columns every list of queue subjects shows (rows are selectors.QueueItem)."""

    euid = tables.TemplateColumn(SUBJECT_LINK, verbose_name="Subject")
    name = tables.Column(verbose_name="Name")
    priority = tables.TemplateColumn(PRIORITY_BADGE, verbose_name="Priority")
    attempts = tables.Column(accessor="attempt_count", verbose_name="Attempts",
                             attrs={"th": {"class": "opt"}, "td": {"class": "num opt"}})
    age = tables.Column(accessor="ready_at", verbose_name="Age", empty_values=())
    # Shown on wide screens only (class "opt"): a tablet keeps the columns that decide a claim.
    site = tables.Column(default="–", attrs=OPTIONAL)
    platform = tables.Column(default="–", attrs=OPTIONAL)
    assay = tables.Column(default="–", attrs=OPTIONAL)

    class Meta:
        orderable = False
        attrs = {"class": "grid cards", "id": "items"}
        row_attrs = {"data-euid": lambda record: record.euid}
        template_name = "django_tables2/table.html"

    def render_age(self, record):
        return age(record.ready_at)


class QueueItemsTable(SubjectRowsTable):
    position = tables.Column(verbose_name="#", attrs={"td": {"class": "num"}})
    ready = tables.Column(accessor="ready_at", verbose_name="Ready", attrs=OPTIONAL)
    due = tables.Column(accessor="due_at", verbose_name="Due", default="–")
    claim = tables.TemplateColumn(CLAIM_BUTTON, verbose_name="Claim", orderable=False,
                                  attrs={"td": {"class": "claim"}})

    class Meta(SubjectRowsTable.Meta):
        sequence = ("position", "euid", "name", "priority", "claim", "ready", "due", "attempts",
                    "age", "site", "platform", "assay")

    def render_ready(self, value):
        return humane(value)

    def render_due(self, value):
        if is_past(value):  # the bench needs to see what is already late
            return format_html('{} <span class="badge bad">overdue</span>', humane(value))
        return humane(value)


class HiddenItemsTable(SubjectRowsTable):
    state = tables.Column(verbose_name="State")
    reasons = tables.Column(verbose_name="Why not visible", empty_values=())

    class Meta(SubjectRowsTable.Meta):
        sequence = ("euid", "name", "state", "priority", "reasons", "attempts", "age", "site",
                    "platform", "assay")

    def render_reasons(self, value):
        return " ".join(r.message for r in value)
