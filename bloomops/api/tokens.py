"""Create, verify, list and revoke API tokens. Tokens look like ``bo_<prefix>_<secret>``.

A token authenticates while it is neither revoked nor expired and its user is active; with
DEBUG off, not for an account that still uses the public demo password either (its sign-in is
refused too, bloomops.accounts.passwords)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.crypto import salted_hmac

from bloomops.accounts.passwords import demo_password_refused, uses_demo_password
from bloomops.api.models import ApiToken
from bloomops.text import line_problem

TOKEN_PREFIX = "bo_"
# last_used_at is bookkeeping; writing it on every request would serialise hot tokens.
LAST_USED_RESOLUTION = timedelta(seconds=60)
MAX_DAYS = 3650


# What a token is stored as: the HMAC, under the secret key, of its sha256. The database
# never holds the key, so someone who can write the token table cannot add a token of their
# own for another person (a bare sha256 they could compute). Stored before, a token's sha256
# became this digest in place (migration 0003), so tokens given earlier still work.
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


def create_token(username: str, *, name: str = "", days: int | None = None
                 ) -> tuple[ApiToken, str]:
    """A new token for the user, valid for ``days`` (default settings.BLOOMOPS_API_TOKEN_DAYS);
    returns the row and the plain token (shown once)."""
    days = settings.BLOOMOPS_API_TOKEN_DAYS if days is None else days
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"a token lives 1 to {MAX_DAYS} days, not {days}")
    if name and (problem := line_problem(name)):  # list_api_tokens prints it
        raise ValueError(f"a token's name {problem}")
    user = get_user_model().objects.get(username=username)
    if not user.is_active:
        # made now, it would start working the day the account is let back in, where nothing
        # issued before is to work (docs/RULES.md#human-workers)
        raise ValueError(f"{username} may not sign in: let them back in on /people/ first")
    prefix = secrets.token_hex(4)
    token = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiToken.objects.create(user=user, name=name, prefix=prefix, token_hash=digest(token),
                                  expires_at=timezone.now() + timedelta(days=days))
    return row, token


def user_for_token(token: str):
    """The active user behind a valid token, or None."""
    if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    now = timezone.now()
    row = (ApiToken.objects.select_related("user")
           .filter(token_hash__in=digests(token), revoked_at__isnull=True, expires_at__gt=now)
           .first())
    if row is None or not row.user.is_active:
        return None
    if demo_password_refused() and uses_demo_password(row.user):
        return None
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


def revoke(*, token_id: int | None = None, prefix: str | None = None,
           username: str | None = None) -> int:
    """Revoke by id, by prefix, or every token of a user. Returns how many were revoked."""
    rows = ApiToken.objects.filter(revoked_at__isnull=True)
    if token_id is not None:
        rows = rows.filter(pk=token_id)
    elif prefix:
        rows = rows.filter(prefix=prefix)
    elif username:
        rows = rows.filter(user__username=username)
    else:
        return 0
    return rows.update(revoked_at=timezone.now())
