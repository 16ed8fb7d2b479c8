"""The approvals waiting for a decision, where operators look (RULES.md#approvals): the
count in the navigation and a small panel on the dashboard and the workbench. One read each."""

from __future__ import annotations

import json

from django import template

from bloomops.accounts.signatures import display_names
from bloomops.execution import selectors
from bloomops.execution.actions.subjects import resets_attempts
from bloomops.execution.approvals import RULE_TEXT
from bloomops.execution.context import action_name
from bloomops.execution.states import parse_priority, priority_class
from bloomops.memo import per_request

register = template.Library()
PANEL_ROWS = 10
# How often an open panel (dashboard, workbench) asks again, with the navigation's count: a
# request made meanwhile went unseen until a reload.
PANEL_REFRESH_SECONDS = 30


def _waiting(context) -> selectors.Waiting:
    """Read once per request: the navigation and a panel on the same page share it."""
    request = context.get("request")
    user = getattr(request, "user", None)
    return per_request(request, "approvals_waiting", lambda: selectors.approvals_waiting(
        limit=PANEL_ROWS, for_user=user.get_username() if user is not None else None))


@register.simple_tag(takes_context=True)
def approvals_waiting_count(context) -> int:
    """The navigation's call to act: the approvals waiting that the person may decide
    (someone else asked them; their own wait for another person)."""
    return _waiting(context).others


@register.inclusion_tag("web/_approvals_panel.html", takes_context=True)
def approvals_panel(context) -> dict:
    waiting = _waiting(context)
    return {"waiting": waiting.rows, "count": waiting.count, "others": waiting.others,
            "is_operator": context.get("is_operator"), "refresh_seconds": PANEL_REFRESH_SECONDS,
            # the askers as the inbox names them (it said "qa" where the inbox said a name)
            "names": display_names(a.props.get("requested_by") for a in waiting.rows)}


@register.filter
def json_text(value) -> str:
    """A value as JSON text, for a hidden form field (escaped by the template as usual)."""
    return json.dumps(value, sort_keys=True)


@register.filter
def rule_words(rule: str | None) -> str:
    """What an approval is for, in words ("Releasing an integrity hold")."""
    return RULE_TEXT.get(rule or "", rule or "–")


@register.filter
def terms(approval) -> str:
    """What the gated action will do beyond its rule, every parameter the signer signs for
    ("to queue lib_prep · priority STAT (300) · attempts reset to 0 · next step qc_rerun"),
    defaults included: nobody approves blindly (RULES.md#approvals). Empty when it takes
    none. ``approval``: a row of selectors.approvals (its props and its subject's state)."""
    props = getattr(approval, "props", None) or {}
    params = props.get("parameters") if isinstance(props.get("parameters"), dict) else {}
    words = []
    requeue = props.get("action_key") == "requeue_subject"
    if requeue:
        words.append(f"to queue {props['queue_key']}" if props.get("queue_key")
                     else "to its own queue")
    if params.get("priority") is not None:
        try:
            value = parse_priority(params["priority"])
        except ValueError:
            value = None
        words.append(f"priority {params['priority']}" if value is None
                     else f"priority {priority_class(value)} ({value})")
    # the requeue's own rule, on the subject as the inbox read it
    reset = resets_attempts(params, bool(getattr(approval, "subject_terminal", False))
                            ) if requeue else params.get("reset_attempts")
    if requeue or "reset_attempts" in params:
        words.append("attempts reset to 0" if reset else "attempts kept")
    if params.get("next_action_key"):
        words.append(f"next step {params['next_action_key']}")
    if props.get("action_key") == "release_execution_hold":
        words.append(_holds_ended(props))
    return " · ".join(w for w in words if w)


def _holds_ended(props: dict) -> str:
    """Which holds a release ends: the one its request named, or every hold the subject had
    then (several: said, so the signer knows an unrelated hold ends too)."""
    euids = props.get("hold_euids") if isinstance(props.get("hold_euids"), list) else []
    codes = props.get("hold_codes") if isinstance(props.get("hold_codes"), list) else []
    said = ", ".join(str(c) for c in codes if c) or ", ".join(str(e) for e in euids)
    if isinstance(props.get("hold_lookup_euid"), str) and props["hold_lookup_euid"]:
        return f"only its {said} hold" if said else "only the hold named"
    return f"all {len(euids)} of its holds: {said}" if len(euids) > 1 else ""


# A decision's record by which way it went (Activity, a bundle's readable check): every
# decision read "Decide approval", a rejection as an approval.
DECIDED = {"APPROVED": "Approved", "REJECTED": "Rejected"}


def asked_for(gated: str | None) -> str:
    """What a request, a withdrawal or a decision was about, after its words: ": release
    hold"; nothing when no action is named."""
    return f": {(action_name(gated) or gated).lower()}" if gated else ""


@register.filter
def approval_status_words(status: str | None) -> str:
    """An approval's status as its page says it: a request its asker took back is stored
    CANCELED (the action record says so) and read "WITHDRAWN"."""
    return "WITHDRAWN" if status == "CANCELED" else (status or "–")


@register.filter
def hold_code_words(code: str) -> str:
    """A hold code as a choice of it reads: said when releasing or cancelling under it will
    need a second person's approval under the lab's rules (QC_FAIL by default), before it
    is placed."""
    from bloomops.execution.approvals import hold_gates

    gated = hold_gates(code)
    ends = [words for key, words in (("release_execution_hold", "release"),
                                     ("cancel_subject_execution", "cancel")) if key in gated]
    return f"{code} (second person to {' or '.join(ends)})" if ends else code
