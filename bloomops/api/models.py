"""API bearer tokens: a Django-side table (like auth and sessions), not a TapDB one.

Only a SHA-256 digest of the token is stored; the token itself is shown once, at creation.
The token's user (and that user's groups) decides the role, exactly as a browser sign-in.
Every token expires (settings.BLOOMOPS_API_TOKEN_DAYS after creation unless chosen otherwise).
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models


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

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    def status(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= now else "active"
