"""The well-known demo password (settings.DEMO_PASSWORD) is refused when DEBUG is off: at
sign-in (backends.SignInBackend) and for the API tokens of accounts that still use it."""

from __future__ import annotations

import hmac
from functools import lru_cache

from django.conf import settings
from django.contrib.auth.hashers import check_password


def demo_password_refused() -> bool:
    return not settings.DEBUG


def is_demo_password(raw: str | None) -> bool:
    return raw is not None and hmac.compare_digest(raw.encode(), settings.DEMO_PASSWORD.encode())


@lru_cache(maxsize=1024)
def _hash_is_demo(encoded: str, demo: str) -> bool:
    # Keyed by the stored hash (salted, and new whenever the password changes), so a token
    # request pays the slow hash once per process and account, not once per request.
    return check_password(demo, encoded)


def uses_demo_password(user) -> bool:
    """Whether the account's stored password is the demo password."""
    encoded = getattr(user, "password", "") or ""
    return bool(encoded) and _hash_is_demo(encoded, settings.DEMO_PASSWORD)
