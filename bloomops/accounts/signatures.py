"""Electronic signatures (RULES.md#approvals): the signer proves who they are by entering
their password again, checked as a sign-in would check it. Through a web or API request,
django-axes counts a wrong password as a failed sign-in of that person from that address,
and a locked-out person cannot sign. The password is only compared, never kept."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth import authenticate
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError

from bloomops.accounts.backends import SignInBackend
from bloomops.text import readable_line

# Longer than any password a person types; refused before the (slow) hash is computed.
MAX_PASSWORD_LENGTH = 4096


def signature_problem(username: str, password: Any, origin: Any = None) -> str | None:
    """Why this password does not sign as ``username`` (None: it does). ``origin`` is the
    HTTP request the signature came with, if any."""
    if not isinstance(password, str) or not password:
        return "Enter your password to sign."
    if len(password) > MAX_PASSWORD_LENGTH:
        return "The password does not match."
    if origin is None:
        # A call from inside the process (a management command, a test): no address to count.
        user = SignInBackend().authenticate(None, username=username, password=password)
        return None if user is not None else "The password does not match."
    user = authenticate(origin, username=username, password=password)
    if getattr(origin, "axes_locked_out", False):
        # Our refusal answers; django-axes' lockout page would replace the API's JSON.
        origin.axes_locked_out = False
        return "Too many wrong passwords: signing is locked for a while."
    if user is None or user.get_username() != username:
        return "The password does not match."
    return None


def display_name(username: str) -> str:
    """The signer's name as the signature shows it: their full name, else the username."""
    return display_names([username]).get(username, username)


def display_names(usernames: Iterable[str]) -> dict[str, str]:
    """Each username's full name, else the username itself (one query): how a history
    names the people in it."""
    from django.contrib.auth.models import User

    wanted = {u for u in usernames if u}
    # readable_line: a name stored by another route (createsuperuser, Django's admin) may
    # hold a terminal escape or a right-to-left override; a signature never prints one
    full = {u.username: readable_line(u.get_full_name()) for u in User.objects.filter(
        username__in=wanted).only("username", "first_name", "last_name")}
    return {u: full.get(u) or u for u in wanted}


def standing_from(username: str, requester: str, since: datetime) -> tuple[str, str] | None:
    """Whether ``requester`` gave this person what they sign with since ``since``: their
    roles (the account made, or its roles changed) or a password set for them, directly or
    through an account the requester set up so in that time. (the account so given, "roles"
    or "password"), or None. Every change record since then is read: none can be pushed out
    by later ones."""
    from bloomops.accounts.models import ProfileChange

    seen: set[str] = set()
    todo = [username]
    while todo:
        who = todo.pop()
        if who in seen:
            continue
        seen.add(who)
        for change in ProfileChange.objects.filter(username=who, changed_at__gte=since):
            what = ("roles" if change.before.get("roles") != change.after.get("roles")
                    else "password" if "password" in change.after else None)
            if what is None:
                continue
            if change.changed_by == requester:
                return who, what
            todo.append(change.changed_by)
    return None


class CountedPasswordChangeForm(PasswordChangeForm):
    """A person's own password change, its current password checked as a signature is: a
    wrong one counts toward that person's sign-in lockout (django-axes) and a locked-out
    person cannot change it, so a session left open is no unlimited guesser of the
    password that signs their approvals."""

    def __init__(self, user, *args, request=None, **kwargs) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        old = self.cleaned_data.get("old_password")
        problem = signature_problem(self.user.get_username(), old, self.request)
        if problem:
            raise ValidationError(problem.replace("signing is", "changing it is"),
                                  code="password_incorrect")
        return old


class CountedPasswordChangeView(PasswordChangeView):
    form_class = CountedPasswordChangeForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}
