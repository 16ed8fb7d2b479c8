"""Bench scientists' human workers: whose they are and what they may do.

A person's HUMAN_SESSION worker is theirs alone (RULES.md#human-workers): its key is derived
from the username, only that person (or an admin) acts through it, and its capabilities,
scopes, lease limit and liveness window come from server-side configuration, never from a
request.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

HUMAN_KEY_PREFIX = "human://"
# Profile fields of a human worker and their defaults when configuration says nothing.
HUMAN_DEFAULTS: dict[str, Any] = {
    "capabilities": [],
    "site_scope": [],
    "platform_scope": [],
    "assay_scope": [],
    # A bench scientist juggles a few items, not a rack.
    "max_concurrent_leases": 5,
    # A human session "heartbeats" whenever its user acts; an hour of silence shows offline.
    "heartbeat_ttl_seconds": 3600,
}
PROFILE_FIELDS = tuple(HUMAN_DEFAULTS)


def human_worker_key(username: str) -> str:
    return f"{HUMAN_KEY_PREFIX}{username}"


def username_of_human_key(worker_key: str) -> str | None:
    if worker_key.startswith(HUMAN_KEY_PREFIX):
        return worker_key[len(HUMAN_KEY_PREFIX):] or None
    return None


def human_profile(username: str, roles: frozenset[str] | set[str] = frozenset()) -> dict:
    """The configured profile of a person's human worker: the defaults, then the global
    capabilities (BLOOMOPS_HUMAN_CAPABILITIES), then BLOOMOPS_HUMAN_PROFILES entries for
    "*", each of the person's roles ("role:<name>") and the person ("user:<name>"), later
    entries overriding earlier ones field by field."""
    profile = {k: (list(v) if isinstance(v, list) else v) for k, v in HUMAN_DEFAULTS.items()}
    profile["capabilities"] = list(settings.BLOOMOPS_HUMAN_CAPABILITIES)
    configured = settings.BLOOMOPS_HUMAN_PROFILES
    keys = ["*", *(f"role:{r}" for r in sorted(roles)), f"user:{username}"]
    for key in keys:
        entry = configured.get(key) or {}
        profile.update({k: v for k, v in entry.items() if k in PROFILE_FIELDS})
    return profile

