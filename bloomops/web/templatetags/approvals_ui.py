"""The approvals waiting for a decision, where operators look (RULES.md#approvals): the
count in the navigation and a small panel on the dashboard and the workbench. One read each."""

from __future__ import annotations

import json

from django import template

from bloomops.execution import selectors
from bloomops.execution.approvals import RULE_TEXT

register = template.Library()
PANEL_ROWS = 10


def _waiting(context) -> selectors.Waiting:
    """Read once per request: the navigation and a panel on the same page share it."""
    request = context.get("request")
    cached = getattr(request, "_bloomops_approvals_waiting", None)
    if cached is None:
        cached = selectors.approvals_waiting(limit=PANEL_ROWS)
        if request is not None:
            request._bloomops_approvals_waiting = cached
    return cached


@register.simple_tag(takes_context=True)
def approvals_waiting_count(context) -> int:
    return _waiting(context).count


@register.inclusion_tag("web/_approvals_panel.html", takes_context=True)
def approvals_panel(context) -> dict:
    waiting = _waiting(context)
    return {"waiting": waiting.rows, "count": waiting.count, "holds_waiting": waiting.holds,
            "is_operator": context.get("is_operator")}


@register.filter
def json_text(value) -> str:
    """A value as JSON text, for a hidden form field (escaped by the template as usual)."""
    return json.dumps(value, sort_keys=True)


@register.filter
def rule_words(rule: str | None) -> str:
    """What an approval is for, in words ("Releasing an integrity hold")."""
    return RULE_TEXT.get(rule or "", rule or "–")
