"""Changing a person: roles, whether they may sign in, and their worker profile. Every change
is a policy change: it needs a reason, and who/when/why/before/after is appended to
``ProfileChange`` in the same transaction (docs/RULES.md#human-workers). A refusal writes
nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction

from bloomops.accounts.models import (
    COMMAND_LINE,
    LIST_FIELDS,
    MAX_LEASES_LIMIT,
    SCOPE_FIELDS,
    PersonProfile,
    ProfileChange,
)
from bloomops.accounts.roles import ALL_ROLES, Role, stored_roles
from bloomops.accounts.sessions import end_sessions
from bloomops.text import line_problem, prose_problem, shows_nothing

# A capability or scope value: a word of letters, digits and . _ : / - (as the demo's
# "wetlab.extraction"), so a typo'd separator cannot hide in a list.
TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$")
MAX_ITEMS = 100
MAX_REASON = 1000


def _end_credentials(user) -> None:
    """What a person signed in with ends, when they may no longer sign in or an admin gives
    them a new password: their sessions here and their API tokens."""
    from bloomops.accounts.tokens import end_tokens

    end_sessions(user)
    end_tokens(user)


def _password_given(user, *, by: str, reason: str, how: str) -> ProfileChange:
    """The record of a password someone else gave (never the password): the person's page
    shows it, and set_up_together follows it."""
    return ProfileChange.objects.create(
        username=user.get_username(), changed_by=by, reason=reason,
        before={"password": "as it was"}, after={"password": f"a new one, given {how}"})


class ProfileError(Exception):
    """A refused change, with a stable code and the form field it concerns."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


@dataclass
class PersonChange:
    roles: list[str]
    is_active: bool
    # None: the person takes the lab-wide default (no profile of their own)
    profile: dict[str, Any] | None
    reason: str
    # the id of the last change the admin's page showed (None: it showed none)
    seen_change: int | None


# What people write in a scope to mean every value, which an empty scope means.
MEANS_ANY = frozenset({"any", "all", "every"})
SCOPE_WORDS = {"site_scope": "site", "platform_scope": "platform", "assay_scope": "assay"}
assert set(SCOPE_WORDS) == set(SCOPE_FIELDS)


def values_problem(field: str, values: list[str]) -> str | None:
    """What is wrong with a list of capabilities or scope values, a person's or a queue's
    (matched exactly, RULES.md#human-workers): a scope of "any" (an empty scope admits every
    value; "any" is a site of that name, and the person would be handed nothing), or two
    values differing only in case ("SFO" and "sfo": one of them matches no subject)."""
    word = SCOPE_WORDS.get(field, "capability")
    seen: dict[str, str] = {}
    for value in values:
        if field in SCOPE_WORDS and value.lower() in MEANS_ANY:
            return f"Leave it empty for any {word}: {value!r} would be a {word} called so."
        first = seen.setdefault(value.casefold(), value)
        if first != value:
            return (f"{first!r} and {value!r} differ only in case: a {word} is matched exactly,"
                    " so give the one your items and people use, once.")
    return None


def parse_tokens(raw: str, field: str) -> list[str]:
    """Comma- or line-separated values, each a TOKEN, without duplicates, in order."""
    out: list[str] = []
    for part in re.split(r"[,\n]", raw or ""):
        value = part.strip()
        if not value:
            continue
        if not TOKEN.fullmatch(value):
            raise ProfileError("VALIDATION_ERROR", f"{value[:40]!r} is not a valid value: use"
                               " letters, digits and . _ : / - (up to 100).", field)
        if value not in out:
            out.append(value)
    if len(out) > MAX_ITEMS:
        raise ProfileError("VALIDATION_ERROR", f"At most {MAX_ITEMS} values.", field)
    problem = values_problem(field, out)
    if problem:
        raise ProfileError("VALIDATION_ERROR", problem, field)
    return out


def snapshot(user) -> dict[str, Any]:
    """What a change record compares: roles, sign-in and the worker profile (absent fields:
    the lab-wide default)."""
    state: dict[str, Any] = {
        "roles": sorted(stored_roles(user)),
        "is_active": user.is_active,
        "own_profile": False,
    }
    stored = PersonProfile.objects.filter(user=user).first()
    if stored is not None:
        state.update(own_profile=True, **stored.worker_fields())
    return state


def last_change_id(username: str) -> int | None:
    return (ProfileChange.objects.filter(username=username)
            .order_by("-id").values_list("id", flat=True).first())


def refuse_without_reason(reason: str | None) -> None:
    """Every change of a person says why (RULES.md#human-workers): up to MAX_REASON
    characters of text."""
    reason = (reason or "").strip()
    if shows_nothing(reason):  # blank, or characters that show as nothing
        raise ProfileError("VALIDATION_ERROR", "Say why: a change of who may do what needs a"
                           " reason.", "reason")
    if len(reason) > MAX_REASON:
        raise ProfileError("VALIDATION_ERROR", f"A reason is up to {MAX_REASON} characters"
                           " of text.", "reason")
    if problem := prose_problem(reason):
        raise ProfileError("VALIDATION_ERROR", f"A reason {problem}.", "reason")


def validate(change: PersonChange, *, target, admin_username: str) -> None:
    refuse_without_reason(change.reason)
    unknown = sorted(set(change.roles) - set(ALL_ROLES))
    if unknown:
        raise ProfileError("VALIDATION_ERROR", "Unknown role: " + ", ".join(unknown) + ".",
                           "roles")
    drops_admin = Role.ADMIN not in change.roles
    if target.get_username() == admin_username and (drops_admin or not change.is_active):
        raise ProfileError("SELF_LOCKOUT", "You may not take away your own admin role or"
                           " sign-in; ask another admin.", "roles")
    if change.profile is not None:
        for name in LIST_FIELDS:
            if not isinstance(change.profile.get(name), list):
                raise ProfileError("VALIDATION_ERROR", f"{name} is a list.", name)
        limit = change.profile.get("max_concurrent_leases")
        if not isinstance(limit, int) or isinstance(limit, bool) or not (
                1 <= limit <= MAX_LEASES_LIMIT):
            raise ProfileError("VALIDATION_ERROR", "The lease limit is a whole number from 1"
                               f" to {MAX_LEASES_LIMIT}.", "max_concurrent_leases")


def change_person(target_id: int, change: PersonChange, *, admin_username: str
                  ) -> ProfileChange | None:
    """Apply a change to a person and record it; None when it changes nothing (nothing is
    written). The person's human worker takes the new profile the next time they act."""
    from django.contrib.auth import get_user_model

    with transaction.atomic():
        # One admin at a time per person: the second sees the first's change as stale.
        target = get_user_model().objects.select_for_update().get(pk=target_id)
        validate(change, target=target, admin_username=admin_username)
        if last_change_id(target.get_username()) != change.seen_change:
            raise ProfileError("REVISION_CONFLICT", "Someone changed this person since the"
                               " page was shown; reload it and try again.")
        before = snapshot(target)
        target.groups.set(Group.objects.filter(name__in=change.roles))
        # A superuser is an admin (roles.stored_roles): taking the role away takes that too,
        # or the record would say admin was removed while it was not.
        superuser = target.is_superuser and Role.ADMIN in change.roles
        if target.is_active and not change.is_active:
            # What they signed in with ends here, not only while they stay inactive: signed
            # in again later, nothing issued before counts (RULES.md#human-workers).
            _end_credentials(target)
        if (target.is_active, target.is_superuser) != (change.is_active, superuser):
            target.is_active, target.is_superuser = change.is_active, superuser
            target.save(update_fields=["is_active", "is_superuser"])
        if change.profile is None:
            PersonProfile.objects.filter(user=target).delete()
        else:
            PersonProfile.objects.update_or_create(user=target, defaults=change.profile)
        after = snapshot(target)
        if after == before:
            transaction.set_rollback(True)
            return None
        return ProfileChange.objects.create(
            username=target.get_username(), changed_by=admin_username,
            reason=change.reason.strip(), before=before, after=after)


# A username is who signs an approval (RULES.md#approvals): it must not read as someone
# else's. Letters of another script ("supervisоr" with a Cyrillic о) or another case
# ("Supervisor") would, so new usernames are ASCII and unique in any case.
USERNAME = re.compile(r"[A-Za-z0-9.@+_-]+")


def username_problem(username: str, model) -> str | None:
    """Why a new account may not have this username, or None."""
    if not USERNAME.fullmatch(username):
        return ("A username may hold only the letters a-z and A-Z, digits and . @ + - _: a"
                " letter of another script can look like someone else's name.")
    taken = model.objects.filter(username__iexact=username).values_list("username", flat=True)
    if taken:
        return (f"A user with that username already exists ({taken[0]}): one name in two"
                " cases would read as one person.")
    return None


def add_person(username: str, *, first_name: str, last_name: str, password: str,
               roles: list[str], reason: str, admin_username: str) -> ProfileChange:
    """A new account with its roles (no profile of its own: the lab-wide default), recorded
    like any other change. The password must pass the site's password validators."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    model = get_user_model()
    probe = model(username=username, first_name=first_name, last_name=last_name)
    try:
        probe.full_clean(exclude=["password"])
    except ValidationError as err:
        field, messages = next(iter(err.message_dict.items()))
        raise ProfileError("VALIDATION_ERROR", " ".join(messages),
                           "username" if field == "username" else None) from None
    problem = username_problem(username, model)
    if problem:
        raise ProfileError("VALIDATION_ERROR", problem, "username")
    for field, value in (("first_name", first_name), ("last_name", last_name)):
        # a signature prints the name (RULES.md#approvals): one readable line
        if value and (problem := line_problem(value)):
            raise ProfileError("VALIDATION_ERROR", f"A name {problem}.", field)
    try:
        validate_password(password, probe)
    except ValidationError as err:
        raise ProfileError("VALIDATION_ERROR", " ".join(err.messages), "password") from None
    change = PersonChange(roles=roles, is_active=True, profile=None, reason=reason,
                          seen_change=None)
    validate(change, target=probe, admin_username=admin_username)
    try:
        with transaction.atomic():
            return _create(model, username, first_name, last_name, password, roles, reason,
                           admin_username)
    except IntegrityError:  # the same name taken meanwhile
        raise ProfileError("VALIDATION_ERROR", "A user with that username already exists.",
                           "username") from None


def _create(model, username: str, first_name: str, last_name: str, password: str,
            roles: list[str], reason: str, admin_username: str) -> ProfileChange:
    user = model.objects.create_user(username, password=password, first_name=first_name,
                                     last_name=last_name)
    user.groups.set(Group.objects.filter(name__in=roles))
    # the admin typed the first password: recorded as given, until the person changes it
    # (accounts.signatures.set_up_together)
    return ProfileChange.objects.create(
        username=username, changed_by=admin_username, reason=reason.strip(),
        before={}, after={**snapshot(user), "password": "given by the admin who made it"})


def set_password(target_id: int, password: str, *, reason: str, admin_username: str
                 ) -> ProfileChange:
    """An admin gives a person a new password (a forgotten one, a mistyped first one): the
    site's validators apply, the person's sessions end, and the change is recorded like any
    other (never the password). A person changes their own on /accounts/password/, which asks
    for the current one."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    refuse_without_reason(reason)
    reason = reason.strip()
    with transaction.atomic():
        target = get_user_model().objects.select_for_update().get(pk=target_id)
        if target.get_username() == admin_username:
            raise ProfileError("SELF_LOCKOUT", "Change your own password on your own page"
                               " (Password, at the top): it asks for the current one.",
                               "password")
        try:
            validate_password(password, target)
        except ValidationError as err:
            raise ProfileError("VALIDATION_ERROR", " ".join(err.messages), "password") from None
        target.set_password(password)
        target.save(update_fields=["password"])
        # a new password is the answer to a lost or stolen one: what was issued before ends
        _end_credentials(target)
        return _password_given(target, by=admin_username, reason=reason, how="by an admin")


def from_shell(command: str, why: str = "") -> str:
    """Why a change made from a shell was made: the reason given (``--reason``), with the
    command and the OS user that ran it (as Django names it; a uid with no passwd entry has
    no name)."""
    from django.contrib.auth.management import get_system_username

    ran = f"manage.py {command}, run as {get_system_username() or 'an unknown OS user'}"
    return f"{why.strip()} ({ran})" if why.strip() else ran


def made_from_command_line(user) -> ProfileChange:
    """An account made by ``manage.py createsuperuser``: recorded as one an admin made, its
    password given by the command line."""
    return ProfileChange.objects.create(
        username=user.get_username(), changed_by=COMMAND_LINE,
        reason=from_shell("createsuperuser"),
        before={}, after={**snapshot(user), "password": "given from the command line"})


def password_from_command_line(user) -> ProfileChange:
    """A password set by ``manage.py changepassword``: what the console does for an admin's
    new password (sessions and API tokens end), recorded as given by the command line."""
    _end_credentials(user)
    return _password_given(user, by=COMMAND_LINE, reason=from_shell("changepassword"),
                           how="from the command line")
