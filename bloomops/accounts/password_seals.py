"""A person's password hash sealed to their account (docs/DEPLOY.md, "Sign-in, sessions and
tokens").

Django checks a password against the hash in the person's ``auth_user`` row and nothing else,
so someone who can write that table could copy their own hash into a colleague's row, sign in
and sign approvals as the colleague, and put the hash back. Every hash bloomops sets is sealed
here: an HMAC under the secret key (which the database never holds) of the account's id,
username and hash. A sign-in, and so a signature, whose row holds a hash not sealed to it is
refused as a wrong password is (accounts/backends.py), and the server log says why.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.utils.crypto import salted_hmac

SALT = "bloomops.accounts.password"


def mac(pk: int, username: str, password_hash: str, secret: str | None = None) -> str:
    return salted_hmac(SALT, f"{pk}\x00{username}\x00{password_hash}", secret=secret,
                       algorithm="sha256").hexdigest()


def seal(user) -> None:
    """Seal the hash the account holds now (set by bloomops, or checked against its seal)."""
    from bloomops.accounts.models import PasswordSeal

    PasswordSeal.objects.update_or_create(
        user_id=user.pk, defaults={"mac": mac(user.pk, user.get_username(), user.password)})


def sealed_by(user) -> int | None:
    """Which key sealed the hash the account holds: 0 the secret key, 1... a fallback
    (``SECRET_KEY_FALLBACKS``); None when no seal is of this hash."""
    from bloomops.accounts.models import PasswordSeal

    stored = PasswordSeal.objects.filter(user_id=user.pk).values_list("mac", flat=True).first()
    if stored is None:
        return None
    for n, secret in enumerate((settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS)):
        if hmac.compare_digest(stored, mac(user.pk, user.get_username(), user.password, secret)):
            return n
    return None


def seal_a_password_set(sender, instance, created: bool = False, **kwargs) -> None:
    """post_save of a user: an account created in this process (``create_user`` and every
    form that adds a person), or a password set in it (``set_password``: ``changepassword``,
    every password form), is sealed. Any other save of the row (its last sign-in, its
    standing) seals nothing: it would seal a hash written behind bloomops' back."""
    if created or getattr(instance, "_password", None) is not None:
        seal(instance)
