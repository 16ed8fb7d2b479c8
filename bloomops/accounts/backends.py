"""Sign-in: Django's backend refusing the public demo password when DEBUG is off, and the
client address django-axes counts failures by."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from bloomops.accounts.passwords import demo_password_refused, is_demo_password

log = logging.getLogger("bloomops.accounts")


class SignInBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None and demo_password_refused() and is_demo_password(password):
            # Refused exactly like a wrong password (same message, counted by django-axes), so
            # the answer never confirms that the password was right. The log tells the admin.
            log.warning("sign-in refused: %s still uses the public demo password", user.username)
            return None
        return user


def client_address(request: HttpRequest) -> str | None:
    """REMOTE_ADDR; behind our TLS proxy, the address the proxy appended to X-Forwarded-For
    (the right-most entry: anything left of it was sent by the client and proves nothing)."""
    if settings.BEHIND_TLS_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        last = forwarded.split(",")[-1].strip()
        if last:
            return last[:64]
    return request.META.get("REMOTE_ADDR")
