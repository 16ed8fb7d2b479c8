"""The four roles (RULES.md#roles), as Django groups."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    WORKER_SERVICE = "worker_service"
    WORKER_HUMAN = "worker_human"
    OPERATOR = "operator"
    ADMIN = "admin"


ALL_ROLES = tuple(r.value for r in Role)
# Each role as the person holding it reads it (the header): a scientist is not a
# "worker_human".
ROLE_WORDS = {Role.WORKER_SERVICE: "service account", Role.WORKER_HUMAN: "at the bench",
              Role.OPERATOR: "operator", Role.ADMIN: "admin"}
# What each role may do, for whoever gives roles (the People screen); RULES.md#roles has them
# in full.
ROLE_DUTIES = {
    Role.WORKER_HUMAN: "a bench scientist: claims items (Scan, a queue's page), completes or"
                       " fails them on My work",
    Role.OPERATOR: "QA and supervisors: holds, releases, requeues and cancels; brings work in"
                   " (Intake); asks and decides two-person approvals",
    Role.ADMIN: "sets the lab up: queues, people, workers and API tokens; may also work at the"
                " bench and do what an operator does",
    Role.WORKER_SERVICE: "not a person: a service, instrument adapter or LIMS calling the API"
                         " with a token, through workers it registers",
}


def roles_of(user) -> frozenset[str]:
    """A user's roles; a superuser is an admin. Cached on the user object per request."""
    if user is None or not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_bloomops_roles", None)
    if cached is None:
        cached = frozenset(stored_roles(user))
        user._bloomops_roles = cached
    return cached


def stored_roles(user) -> set[str]:
    """The roles as stored now, not cached: the role groups the user is in (prefetched groups
    are used as they are), and admin for a superuser."""
    names = {g.name for g in user.groups.all() if g.name in ALL_ROLES}
    return names | {Role.ADMIN.value} if user.is_superuser else names


# Who may work at the bench through a human worker: people with the role, and admins.
BENCH_ROLES = frozenset({Role.WORKER_HUMAN.value, Role.ADMIN.value})
