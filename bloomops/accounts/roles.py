"""The four roles (RULES.md#roles), as Django groups."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    WORKER_SERVICE = "worker_service"
    WORKER_HUMAN = "worker_human"
    OPERATOR = "operator"
    ADMIN = "admin"


ALL_ROLES = tuple(r.value for r in Role)


def roles_of(user) -> frozenset[str]:
    """A user's roles; a superuser is an admin. Cached on the user object per request."""
    if user is None or not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_bloomops_roles", None)
    if cached is None:
        names = set(user.groups.values_list("name", flat=True))
        if user.is_superuser:
            names.add(Role.ADMIN.value)
        cached = frozenset(n for n in names if n in ALL_ROLES)
        user._bloomops_roles = cached
    return cached
