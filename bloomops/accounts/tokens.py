"""Create, verify, list and revoke API tokens. Tokens look like ``bo_<prefix>_<secret>``.

A token authenticates while it is neither revoked nor expired and its user is active; with
DEBUG off, not for an account that still uses the public demo password either (its sign-in is
refused too, bloomops.accounts.passwords). Giving and revoking one is a change of what a person
may do, so each is recorded with who and why in the person's change history
(RULES.md#api-tokens), whether an admin did it on the People screen or from a shell."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from bloomops.accounts.models import ApiToken, ProfileChange
from bloomops.accounts.passwords import demo_password_refused, uses_demo_password
from bloomops.accounts.profiles import ProfileError, refuse_without_reason
from bloomops.text import line_problem

TOKEN_PREFIX = "bo_"
# last_used_at is bookkeeping; writing it on every request would serialise hot tokens.
LAST_USED_RESOLUTION = timedelta(seconds=60)
MAX_DAYS = 3650
NAME_LENGTH = ApiToken._meta.get_field("name").max_length


# What a token is stored as: the HMAC, under the secret key, of its sha256. The database
# never holds the key, so someone who can write the token table cannot add a token of their
# own for another person (a bare sha256 they could compute). Stored before, a token's sha256
# became this digest in place (bloomops_api migration 0003), so tokens given earlier still work.
DIGEST_SALT = "bloomops.api.token"


def keyed(sha256_hex: str, secret: str | None = None) -> str:
    return salted_hmac(DIGEST_SALT, sha256_hex, secret=secret, algorithm="sha256").hexdigest()


def digests(token: str) -> list[str]:
    """The token's digest under the secret key and under each fallback key: a rotated key
    ends no token (``SECRET_KEY_FALLBACKS``, as for Django's own signatures)."""
    sha = hashlib.sha256(token.encode()).hexdigest()
    return [keyed(sha, secret) for secret in (settings.SECRET_KEY,
                                              *settings.SECRET_KEY_FALLBACKS)]


def digest(token: str) -> str:
    return digests(token)[0]


def create_token(username: str, *, by: str, reason: str, name: str = "",
                 days: int | None = None) -> tuple[ApiToken, str]:
    """A new token for the user, valid for ``days`` (default settings.BLOOMOPS_API_TOKEN_DAYS),
    recorded as given by ``by`` for ``reason``; returns the row and the plain token (shown
    once). A refusal (ProfileError, with the field it concerns) writes nothing."""
    days = settings.BLOOMOPS_API_TOKEN_DAYS if days is None else days
    if not 1 <= days <= MAX_DAYS:
        raise ProfileError("VALIDATION_ERROR", f"A token lives 1 to {MAX_DAYS} days, not {days}.",
                           "days")
    name = name.strip()  # "   " is no name: the list showed a token called nothing
    if name and (problem := line_problem(name)):  # list_api_tokens prints it
        raise ProfileError("VALIDATION_ERROR", f"A token's name {problem}.", "name")
    if len(name) > NAME_LENGTH:
        raise ProfileError("VALIDATION_ERROR", f"A token's name is up to {NAME_LENGTH}"
                           " characters.", "name")
    refuse_without_reason(reason)
    with transaction.atomic():
        user = get_user_model().objects.select_for_update().get(username=username)
        if not user.is_active:
            # made now, it would start working the day the account is let back in, where
            # nothing issued before is to work (docs/RULES.md#human-workers)
            raise ProfileError("SIGN_IN_OFF", f"{username} may not sign in: let them back in"
                               " first (May sign in, on their page).")
        prefix = secrets.token_hex(4)
        token = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
        row = ApiToken.objects.create(user=user, name=name, prefix=prefix, given_by=by,
                                      token_hash=digest(token),
                                      expires_at=timezone.now() + timedelta(days=days))
        ProfileChange.objects.create(
            username=username, changed_by=by, reason=reason.strip(), before={},
            after={"api_token": f"{described(row)} given, until"
                                f" {row.expires_at.date().isoformat()}"})
    return row, token


def described(row: ApiToken) -> str:
    """A token as its change record and its list name it: its prefix and its name."""
    return f"{TOKEN_PREFIX}{row.prefix}…" + (f" “{row.name}”" if row.name else "")


def user_for_token(token: str):
    """The active user behind a valid token, or None."""
    if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    now = timezone.now()
    row = (ApiToken.objects.select_related("user")
           .filter(ApiToken.working(now), token_hash__in=digests(token))
           .first())
    if row is None or not row.user.is_active:
        return None
    if demo_password_refused() and uses_demo_password(row.user):
        return None
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


def bare_prefix(prefix: str | None) -> str | None:
    """A token's prefix as stored, from one written as the pages and the list show it
    ("bo_e776d7ea…", copied from a person's page, matched no token)."""
    return prefix.strip().removeprefix(TOKEN_PREFIX).rstrip("….").strip() if prefix else prefix


def revoke(*, by: str, reason: str, token_id: int | None = None, prefix: str | None = None,
           username: str | None = None) -> int:
    """Revoke by id, by prefix, or every token of a user, each recorded as revoked by ``by``
    for ``reason``. Returns how many were revoked (a revoked one is not revoked again)."""
    refuse_without_reason(reason)
    prefix = bare_prefix(prefix)
    if token_id is None and not prefix and not username:
        return 0
    with transaction.atomic():
        rows = ApiToken.objects.select_for_update().select_related("user").filter(
            revoked_at__isnull=True)
        if token_id is not None:
            rows = rows.filter(pk=token_id)
        elif prefix:
            rows = rows.filter(prefix=prefix)
        else:
            rows = rows.filter(user__username=username)
        ended = list(rows)
        ApiToken.objects.filter(pk__in=[r.pk for r in ended]).update(revoked_at=timezone.now())
        ProfileChange.objects.bulk_create([ProfileChange(
            username=r.user.get_username(), changed_by=by, reason=reason.strip(),
            before={"api_token": f"{described(r)} active"},
            after={"api_token": f"{described(r)} revoked"}) for r in ended])
    return len(ended)


def named_tokens_exist(*, token_id: int | None = None, prefix: str | None = None,
                       username: str | None = None) -> bool:
    """Whether what a revoke named is there at all (a token, revoked or not; or a person):
    revoking it again is then done already, not a mistake."""
    prefix = bare_prefix(prefix)
    if token_id is not None:
        return ApiToken.objects.filter(pk=token_id).exists()
    if prefix:
        return ApiToken.objects.filter(prefix=prefix).exists()
    return bool(username) and get_user_model().objects.filter(username=username).exists()


def token_givers(since: datetime) -> dict[str, set[str]]:
    """username -> who else gave them a token that worked at any time since ``since`` (an
    approval's lifetime ago): whoever held it could have asked for anything as them through
    the API, and revoking it after asking does not undo the asking. One query."""
    from django.db.models import F, Q

    out: dict[str, set[str]] = {}
    for username, by in (ApiToken.objects.filter(
            Q(revoked_at__isnull=True) | Q(revoked_at__gte=since), expires_at__gte=since)
                         .exclude(given_by="").exclude(given_by=F("user__username"))
                         .values_list("user__username", "given_by")):
        out.setdefault(username, set()).add(by)
    return out


def expiring(now: datetime) -> list[ApiToken]:
    """Working tokens of active accounts about to expire (``ApiToken.expires_soon``),
    soonest first. One query."""
    from bloomops.accounts.models import EXPIRY_WARNING

    rows = ApiToken.objects.select_related("user").filter(
        ApiToken.working(now), expires_at__lte=now + EXPIRY_WARNING, user__is_active=True)
    return [r for r in rows.order_by("expires_at", "id") if r.expires_soon(now)]


def end_tokens(user) -> int:
    """Every token of a person who may no longer sign in, or was given a new password: the
    change that ended them is their record."""
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now())
