"""Sign-in: Django's password check, refusing a hash not sealed to its account
(accounts/password_seals.py) and the public demo password when DEBUG is off; and the client
address django-axes counts failures by."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from bloomops.accounts.password_seals import seal, sealed_by
from bloomops.accounts.passwords import demo_password_refused, is_demo_password

log = logging.getLogger("bloomops.accounts")


class SignInBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        user = self._sealed_password_user(username or kwargs.get(
            get_user_model().USERNAME_FIELD), password)
        if user is not None and demo_password_refused() and is_demo_password(password):
            # Refused exactly like a wrong password (same message, counted by django-axes), so
            # the answer never confirms that the password was right. The log tells the admin.
            log.warning("sign-in refused: %s still uses the public demo password", user.username)
            return None
        return user

    def _sealed_password_user(self, username: str | None, password: str | None):
        """ModelBackend's check, with the hash's seal (accounts/password_seals.py) read
        before the password is checked: Django re-hashes an outdated hash while checking it,
        and the seal is of the hash as it was found."""
        model = get_user_model()
        if username is None or password is None:
            return None
        try:
            user = model._default_manager.get_by_natural_key(username)
        except model.DoesNotExist:
            model().set_password(password)  # as long as a wrong password takes (#20760)
            return None
        key, found = sealed_by(user), user.password
        if not (user.check_password(password) and self.user_can_authenticate(user)):
            return None
        if key is None:
            # Refused like a wrong password: the answer must not say the password was right.
            log.warning("sign-in refused: the password hash of %s was not set by bloomops"
                        " (written into auth_user outside it); an admin gives a new one",
                        user.get_username())
            return None
        if key or user.password != found:  # sealed under a fallback key; or re-hashed
            seal(user)
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
