"""The words a person typed into a form that was refused, kept in their session for the
page shown next, where the template tag ``draft`` puts them back once. Never a password."""

from __future__ import annotations

from django.http import HttpRequest

DRAFT_FIELDS = ("reason", "error_message")


def draft_key(action: str, name: str) -> str:
    """The session key of a field of the form posting to ``action`` (a path)."""
    return f"draft:{action}:{name}"


def keep_draft(request: HttpRequest) -> None:
    for name in DRAFT_FIELDS:
        value = request.POST.get(name, "").strip()
        if value:
            request.session[draft_key(request.path, name)] = value[:4000]
