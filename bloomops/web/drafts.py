"""The words a person typed into a form that was refused, kept in their session for the
next page rendered, and only that one: the refusal's message repeats them (the form may be
gone from that page), and the template tag ``draft`` puts them back into the form when it is
there. A draft never reaches a later page, where it would fill a form nobody chose to fill
(a cancel reason carried to another cancel). Never a password."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest

from bloomops.execution.results import RESULT_FIELD
from bloomops.text import readable_line, readable_prose
from bloomops.web.bench_words import field_refusal

# The fields kept, and how the refusal's message names the words of each.
DRAFT_FIELDS = {"reason": "Your reason", "error_message": "What went wrong, as you wrote it,",
                "hold_code": None, "error_class": None, "next_queue_key": None}
SESSION_KEY = "refused_form_drafts"
# A completion's result fields in the Complete form ("result.rin", bench_items): kept too,
# a measurement typed once.
RESULT_INPUT = "result."
# A Complete's next queue left empty ("none: finish the flow") is a choice too, kept as this
# (no queue key starts with "-"): dropped as empty, the form came back on the flow's default.
FINISHED = "-finish"
# A field's problem is kept under its name after this (the template tag ``draft`` reads it
# beside the input: a gloved hand fixes the field the words sit under).
PROBLEM = "!"


def draft_key(action: str, name: str) -> str:
    """A field of the form posting to ``action`` (a path)."""
    return f"{action}:{name}"


def keep_draft(request: HttpRequest, *, refill: bool = True,
               problems: Iterable[dict[str, Any]] = (),
               labels: dict[str, str] | None = None) -> None:
    """The words are said in the refusal's message; with ``refill`` kept in the session too,
    for the form to show again, with each result field's ``problems`` (the refusal's) to be
    said beside its input (``PROBLEM`` + its name). A request from nobody signed in says them
    only: kept, every such request would add a session row anyone could post without end."""
    # words nobody would see (spaces, zero-width characters) are not worth giving back
    names = [*DRAFT_FIELDS, *[n for n in request.POST if n.startswith(RESULT_INPUT)][:50]]
    kept = {draft_key(request.path, name): value[:4000]
            for name in names
            if readable_line(value := request.POST.get(name, "").strip())}
    for problem in problems:
        field = problem.get("field")
        if isinstance(field, str) and field.startswith(RESULT_FIELD):
            name = PROBLEM + RESULT_INPUT + field.removeprefix(RESULT_FIELD)
            kept[draft_key(request.path, name)] = field_refusal(problem)[:1000]
        elif field == "next_queue_key":  # the Next queue list, marked where it is refused
            kept[draft_key(request.path, PROBLEM + field)] = str(problem.get("message"))[:1000]
    if "next_queue_key" in request.POST and not request.POST["next_queue_key"].strip():
        kept[draft_key(request.path, "next_queue_key")] = FINISHED
    if not kept:
        return
    if refill:
        request.session[SESSION_KEY] = kept
    for name, words in DRAFT_FIELDS.items():
        value = kept.get(draft_key(request.path, name))
        if words and value:
            # said as typed, but a control that reorders text written out, not obeyed (the
            # refusal of one echoed the words reversed)
            messages.info(request, f"{words} was not recorded:"
                                   f" \u201c{readable_prose(value[:500])}\u201d")
    # each by the label the form showed it under (``labels``, key -> label), else its key
    typed = [f"{(labels or {}).get(key, key)} {value[:100]}" for name in names
             if name.startswith(RESULT_INPUT)
             and (key := name.removeprefix(RESULT_INPUT))
             and (value := kept.get(draft_key(request.path, name)))]
    if typed and not refill:  # the form will not be filled again: its results are said
        messages.info(request, f"The results you typed were not recorded: {', '.join(typed)}")


def drafts(request: HttpRequest) -> dict[str, Any]:
    """Context processor: the drafts of the refusal just answered, taken out of the session
    by whichever page renders next."""
    session = getattr(request, "session", None)
    return {"refused_drafts": session.pop(SESSION_KEY, {}) if session is not None else {}}
