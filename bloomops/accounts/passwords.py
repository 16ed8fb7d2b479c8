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


class LabPasswordValidator:
    """A password is also its person's electronic signature (docs/RULES.md#approvals): not
    the published demo password (sign-in refuses it once DEBUG is off) and not one that
    holds the username (Django's similarity check lets "jdoe2026!" through for jdoe)."""

    def validate(self, password: str, user=None) -> None:
        from django.core.exceptions import ValidationError

        if is_demo_password(password):
            raise ValidationError("This is the demo's published password; choose another.",
                                  code="password_is_demo")
        name = (getattr(user, "username", "") or "").casefold()
        if len(name) >= 3 and name in password.casefold():
            raise ValidationError("The password contains the username.",
                                  code="password_has_username")

    def get_help_text(self) -> str:
        return "Not the demo password, and not containing your username."
