"""A person's worker profile and the record of every change to it (docs/RULES.md#human-workers).

The profile belongs to the sign-in identity (Django's user), so it lives beside it in a Django
table; the history is append-only (the runtime database role may only read and insert it,
docs/ARCHITECTURE.md, "Decisions worth knowing").
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.sessions.base_session import AbstractBaseSession
from django.db import models

# A person's worker fields an admin sets (heartbeat_ttl_seconds stays lab-wide).
SCOPE_FIELDS = ("site_scope", "platform_scope", "assay_scope")
LIST_FIELDS = ("capabilities", *SCOPE_FIELDS)
MAX_LEASES_LIMIT = 1000  # the engine's bound on max_concurrent_leases (register_worker)


class PersonProfile(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="worker_profile")
    capabilities = models.JSONField(default=list)
    site_scope = models.JSONField(default=list)
    platform_scope = models.JSONField(default=list)
    assay_scope = models.JSONField(default=list)
    max_concurrent_leases = models.PositiveIntegerField(default=5)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"worker profile of {self.user}"

    def worker_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: list(getattr(self, name) or []) for name in LIST_FIELDS}
        out["max_concurrent_leases"] = self.max_concurrent_leases
        return out


# Who may appear as a change's maker without being a person: the demo's seeding.
SYSTEM_MAKERS = ("seed_demo",)
# Who a change made from a shell (manage.py changepassword, createsuperuser) is recorded as:
# no username holds a space, so no person can be taken for it; one maker for every change made
# there, since who sat at the shell is not known (RULES.md#approvals).
COMMAND_LINE = "(command line)"


class ProfileChange(models.Model):
    """Who changed whose roles or worker profile, when, why, from what to what. Usernames are
    kept as text so the record outlives the accounts it names."""

    username = models.CharField(max_length=150, db_index=True)
    changed_by = models.CharField(max_length=150)
    changed_at = models.DateTimeField(auto_now_add=True, db_index=True)
    reason = models.TextField()
    before = models.JSONField()
    after = models.JSONField()

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.changed_by} changed {self.username} at {self.changed_at}: {self.reason}"

    def changed_fields(self) -> list[str]:
        return sorted(k for k in set(self.before) | set(self.after)
                      if self.before.get(k) != self.after.get(k))

    def diff(self) -> list[tuple[str, Any, Any]]:
        """(field, before, after) as people read them: an empty scope is "any" (it admits
        every site), not "none"; a worker field of a person without a profile of their own
        (profiles.snapshot leaves it out) is the lab default, not nothing."""
        def shown(field: str, side: dict[str, Any]) -> Any:
            if field not in side and side.get("own_profile") is False:
                return "lab default"
            value = side.get(field)
            return "any" if field in SCOPE_FIELDS and value == [] else value

        return [(k, shown(k, self.before), shown(k, self.after)) for k in self.changed_fields()]


class StoredSession(AbstractBaseSession):
    """A session stored under a keyed digest of its cookie, with the person signed in
    (accounts/session_store.py)."""

    user_id = models.IntegerField(null=True, db_index=True)

    @classmethod
    def get_session_store_class(cls):
        from bloomops.accounts.session_store import SessionStore

        return SessionStore


class PasswordSeal(models.Model):
    """The seal of the password hash an account holds (accounts/password_seals.py)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                primary_key=True, related_name="password_seal")
    mac = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"password seal of user {self.user_id}"


# API bearer tokens (accounts/tokens.py): only a keyed digest of a token is stored; the token is
# shown once, at creation. Its user (and that user's groups) decides the role, as a sign-in does.
class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    # The first characters of the token, so an operator can tell tokens apart in a list.
    prefix = models.CharField(max_length=16, db_index=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # who gave it (a username, or COMMAND_LINE; empty for tokens given before this was kept):
    # while it works they can act as its person (accounts.signatures.set_up_together)
    given_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        # made by the API app before tokens were given on the People screen too; the
        # table kept its name when the model moved here (migration 0007)
        db_table = "bloomops_api_apitoken"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @staticmethod
    def working(now: datetime, via: str = "") -> models.Q:
        """The tokens that authenticate at ``now``: neither revoked nor expired (``via``: the
        relation a query reaches them through, as ``api_tokens__``)."""
        return models.Q(**{f"{via}revoked_at__isnull": True, f"{via}expires_at__gt": now})

    def status(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= now else "active"

    def expires_soon(self, now: datetime) -> bool:
        """Working, with less left than the warning time (RULES.md#api-tokens), or than a
        quarter of its lifetime when that is shorter: a week-long token is not "about to
        expire" all week."""
        left = self.expires_at - now
        return self.status(now) == "active" and left <= min(
            EXPIRY_WARNING, (self.expires_at - self.created_at) / 4)


# How long before a working token expires the console says so: time to give its service a
# new one before its calls start to answer 401.
EXPIRY_WARNING = timedelta(days=14)
