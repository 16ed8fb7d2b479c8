"""A person's API tokens on their page (admins only, RULES.md#api-tokens): the list, giving one
(shown once, on the page the giving answers with, never again) and revoking one, each with a
reason that goes into the person's change record."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from bloomops.accounts.models import ApiToken
from bloomops.accounts.profiles import MAX_REASON, ProfileError
from bloomops.accounts.tokens import MAX_DAYS, NAME_LENGTH, create_token, described, revoke
from bloomops.web.views.common import not_found
from bloomops.web.views.people import admin_only, person_named, person_page

# Enough for any account's working set; older revoked and expired ones are in the history.
LISTED = 50
# The token forms this session has sent (their keys), so a reload gives no second token.
GIVEN_KEY = "bloomops_token_forms_sent"


class TokenForm(forms.Form):
    name = forms.CharField(required=False, max_length=NAME_LENGTH, label="Token name", help_text=(
        "Tells this token apart in the list, e.g. the machine or script that holds it."))
    days = forms.IntegerField(min_value=1, max_value=MAX_DAYS, label="Days until it expires",
                              initial=settings.BLOOMOPS_API_TOKEN_DAYS)
    # required by accounts.profiles.refuse_without_reason, the one home of the rule
    reason = forms.CharField(required=False, max_length=MAX_REASON, label="Why it is given",
                             help_text="Recorded with the token's prefix and name.")

    def __init__(self, *args, **kwargs) -> None:
        # its fields share names with the person form's on the same page, not their ids
        super().__init__(*args, auto_id="token-%s", **kwargs)


def tokens_of(user) -> list[dict]:
    """The person's tokens: every active one (with its revoke form), newest first, then the
    newest of those that ended. Two queries."""
    now = timezone.now()
    working = ApiToken.working(now)
    # every working token, however many ended since (each may need revoking here), then
    # the newest of those that ended
    rows = ApiToken.objects.filter(user=user).order_by("-id")
    return [{"row": row, "said": described(row), "status": row.status(now),
             "soon": row.expires_soon(now)}
            for row in [*rows.filter(working), *rows.exclude(working)[:LISTED]]]


@require_POST
@admin_only
def person_token_new(request: HttpRequest, username: str) -> HttpResponse:
    target = person_named(username)
    if target is None:
        return not_found(request, f"No person {username}.")
    # the form sent again (a reload of the page that showed the token): the token it gave
    # was shown once, and a second one nobody asked for would work just the same
    sent = request.POST.get("idempotency_key", "")[:100]
    form = TokenForm(request.POST)
    # claimed in the session as stored, before the token is made: of a double click's two
    # requests, each of which read the session before the other gave, only one gives
    if form.is_valid() and sent and not request.session.add_once(GIVEN_KEY, sent, keep=20):
        messages.info(request, "That form was sent before (a reload or a second click?): its"
                      " token was given then and shown once. If it was not copied, revoke it"
                      " below and give another.")
        return redirect(reverse("person", args=[username]) + "#api-tokens")
    if form.is_valid():
        data = form.cleaned_data
        try:
            row, token = create_token(username, name=data["name"], days=data["days"],
                                      by=request.user.get_username(), reason=data["reason"])
        except ProfileError as err:
            form.add_error(err.field if err.field in form.fields else None, err.message)
            if sent:  # nothing was given: the form may be sent again, corrected
                request.session.discard_once(GIVEN_KEY, sent)
        else:
            return person_page(request, target, given={"row": row, "token": token},
                               status=201)
    return person_page(request, target, token_form=form, status=400)


@require_POST
@admin_only
def person_token_revoke(request: HttpRequest, username: str, token_id: int) -> HttpResponse:
    target = person_named(username)
    row = ApiToken.objects.filter(pk=token_id, user=target).first() if target else None
    if row is None:
        return not_found(request, f"{username} has no token {token_id}.")
    try:
        ended = revoke(token_id=row.pk, by=request.user.get_username(),
                       reason=request.POST.get("reason", "")[:MAX_REASON + 1])
    except ProfileError as err:
        # the person's page again, as at any refusal there: nothing was written
        messages.error(request, f"{described(row)} was not revoked: {err.message}")
        return person_page(request, target, status=400)
    else:
        if ended:
            messages.success(request, f"{described(row)} is revoked: the API refuses it from"
                             " now on.")
        else:
            messages.info(request, f"{described(row)} was already revoked.")
    return redirect(reverse("person", args=[username]) + "#api-tokens")
