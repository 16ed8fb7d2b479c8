"""Bench scientists' human workers: whose they are and what they may do.

A person's HUMAN_SESSION worker is theirs alone (RULES.md#human-workers): its key is derived
from the username, only that person (or an admin) acts through it, and its capabilities,
scopes and lease limit come from the person's profile an admin keeps (``accounts.models``),
or, for people without one, from the lab-wide default in settings; never from a request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from bloomops.accounts.models import LIST_FIELDS, SCOPE_FIELDS, PersonProfile
from bloomops.accounts.roles import ALL_ROLES, Role
from bloomops.accounts.signatures import display_names
from bloomops.execution.errors import ActionError
from bloomops.execution.states import WorkerStatus, WorkerType
from bloomops.tapdb.db import fetch_all

HUMAN_KEY_PREFIX = "human://"
# Profile fields of a human worker and their defaults when configuration says nothing.
HUMAN_DEFAULTS: dict[str, Any] = {
    "capabilities": [],
    "site_scope": [],
    "platform_scope": [],
    "assay_scope": [],
    # A bench scientist juggles a few items, not a rack.
    "max_concurrent_leases": 5,
    # A human session "heartbeats" whenever its user acts; silent longer than a session may
    # stay idle (settings.SESSION_IDLE_SECONDS: then it is signed out), it shows offline.
    "heartbeat_ttl_seconds": None,
}
PROFILE_FIELDS = tuple(HUMAN_DEFAULTS)


def human_worker_key(username: str) -> str:
    return f"{HUMAN_KEY_PREFIX}{username}"


def username_of_human_key(worker_key: str) -> str | None:
    if worker_key.startswith(HUMAN_KEY_PREFIX):
        return worker_key[len(HUMAN_KEY_PREFIX):] or None
    return None


def check_settings() -> None:
    """Refuse to start with a BLOOMOPS_HUMAN_PROFILES the defaults would silently ignore in
    part (a misspelt field or role is a profile nobody gets)."""
    from django.core.exceptions import ImproperlyConfigured

    configured = settings.BLOOMOPS_HUMAN_PROFILES
    if not isinstance(configured, dict):
        raise ImproperlyConfigured("BLOOMOPS_HUMAN_PROFILES must be a JSON object.")
    for key, entry in configured.items():
        kind, _, name = str(key).partition(":")
        if not (key == "*" or (kind == "role" and name in ALL_ROLES)
                or (kind == "user" and name)):
            raise ImproperlyConfigured(
                f"BLOOMOPS_HUMAN_PROFILES: {key!r} is not \"*\", \"role:<role>\" (one of"
                f" {', '.join(ALL_ROLES)}) or \"user:<username>\".")
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"BLOOMOPS_HUMAN_PROFILES[{key!r}] must be an object.")
        for field, value in entry.items():
            if field not in PROFILE_FIELDS:
                raise ImproperlyConfigured(
                    f"BLOOMOPS_HUMAN_PROFILES[{key!r}]: no field {field!r}; fields:"
                    f" {', '.join(PROFILE_FIELDS)}.")
            wanted_list = isinstance(HUMAN_DEFAULTS[field], list)
            if (wanted_list and not (isinstance(value, list)
                                     and all(isinstance(v, str) and v for v in value))) or (
                    not wanted_list and (isinstance(value, bool) or not isinstance(value, int)
                                         or value < 1)):
                raise ImproperlyConfigured(
                    f"BLOOMOPS_HUMAN_PROFILES[{key!r}].{field} must be"
                    f" {'a list of texts' if wanted_list else 'a positive integer'}.")


def default_profile(username: str, roles: frozenset[str] | set[str] = frozenset()) -> dict:
    """The lab-wide default of a person without a profile of their own: the defaults, then
    BLOOMOPS_HUMAN_CAPABILITIES, then BLOOMOPS_HUMAN_PROFILES entries for "*", each of the
    person's roles ("role:<name>") and the person ("user:<name>"), later entries overriding
    earlier ones field by field."""
    profile = {k: (list(v) if isinstance(v, list) else v) for k, v in HUMAN_DEFAULTS.items()}
    profile["capabilities"] = list(settings.BLOOMOPS_HUMAN_CAPABILITIES)
    profile["heartbeat_ttl_seconds"] = settings.SESSION_IDLE_SECONDS
    configured = settings.BLOOMOPS_HUMAN_PROFILES
    keys = ["*", *(f"role:{r}" for r in sorted(roles)), f"user:{username}"]
    for key in keys:
        entry = configured.get(key) or {}
        profile.update({k: v for k, v in entry.items() if k in PROFILE_FIELDS})
    return profile


def effective_profile(username: str, roles: frozenset[str] | set[str],
                      stored: PersonProfile | None) -> dict:
    """A stored profile replaces the default's capabilities, scopes and lease limit; the
    liveness window stays lab-wide."""
    profile = default_profile(username, roles)
    if stored is not None:
        profile.update(stored.worker_fields())
    return profile


def works_at_bench(username: str) -> bool:
    """An active account, of exactly this username, whose roles let it work at the bench
    (accounts.roles.BENCH_ROLES): who a human worker may stand for."""
    from bloomops.accounts.roles import BENCH_ROLES, roles_of

    user = get_user_model().objects.filter(username=username, is_active=True).first()
    return user is not None and bool(roles_of(user) & BENCH_ROLES)


def current_profile(username: str) -> dict:
    """The profile a person's worker has now: their stored one (or the lab default) with the
    roles they hold now."""
    from bloomops.accounts.roles import roles_of

    user = get_user_model().objects.filter(username=username).first()
    return human_profile(username, roles_of(user) if user is not None else frozenset())


def person_worker_name(username: str) -> str:
    """The name a person's worker goes by: theirs, as their account holds it (a request
    named one "Supervisor Sasha" on the workers page)."""
    return display_names([username]).get(username) or username


def refuse_another_name(username: str, asked: Any) -> str:
    """The person's worker name (person_worker_name); a request naming it otherwise is
    refused: identity comes from the account, never a request."""
    name = person_worker_name(username)
    if asked is not None and asked != name:
        raise ActionError("VALIDATION_ERROR", "A person's worker goes by their name as their"
                          f" account holds it ({name!r}); display_name cannot change it.",
                          field="display_name")
    return name


def human_profile(username: str, roles: frozenset[str] | set[str] = frozenset()) -> dict:
    """The profile a person's human worker takes each time they act."""
    stored = PersonProfile.objects.filter(user__username=username).first()
    return effective_profile(username, roles, stored)


@dataclass(frozen=True)
class RosteredPerson:
    username: str
    display_name: str
    profile: dict[str, Any]

    @property
    def worker_key(self) -> str:
        return human_worker_key(self.username)


def rostered_people() -> list[RosteredPerson]:
    """Active people with the worker_human role and the profile their worker would take:
    the bench scientists a queue can count on whether or not they are signed in. One query
    (a row per person and role, their stored profile joined)."""
    profile_cols = [f"worker_profile__{name}" for name in (*LIST_FIELDS,
                                                           "max_concurrent_leases")]
    rows = (get_user_model().objects
            .filter(is_active=True, pk__in=get_user_model().objects.filter(
                groups__name=Role.WORKER_HUMAN).values("pk"))
            .values("username", "first_name", "last_name", "is_superuser", "groups__name",
                    "worker_profile__id", *profile_cols)
            .order_by("username"))
    people: dict[str, dict[str, Any]] = {}
    for row in rows:
        person = people.setdefault(row["username"], {**row, "roles": set()})
        if row["groups__name"] in ALL_ROLES:
            person["roles"].add(row["groups__name"])
        if row["is_superuser"]:
            person["roles"].add(Role.ADMIN.value)
    out = []
    for username, row in people.items():
        stored = None
        if row["worker_profile__id"] is not None:
            stored = PersonProfile(**{c.removeprefix("worker_profile__"): row[c]
                                      for c in profile_cols})
        name = f"{row['first_name']} {row['last_name']}".strip()
        out.append(RosteredPerson(
            username=username, display_name=name or username,
            profile=effective_profile(username, frozenset(row["roles"]), stored)))
    return out


# An account's stored profile unless it is an admin's: one prepared statement, since every
# claim by a service worker asks it (the ORM's form of it cost a claim a millisecond).
_ACCOUNT_BOUNDS = f"""
    SELECT u.username, p.capabilities, p.site_scope, p.platform_scope, p.assay_scope,
           p.max_concurrent_leases
    FROM {PersonProfile._meta.db_table} p
    JOIN {get_user_model()._meta.db_table} u ON u.id = p.user_id
    WHERE u.username = ANY(%(usernames)s) AND NOT u.is_superuser
      AND NOT EXISTS (
          SELECT 1 FROM {get_user_model().groups.through._meta.db_table} ug
          JOIN {Group._meta.db_table} g ON g.id = ug.group_id
          WHERE ug.user_id = u.id AND g.name = %(admin)s)"""


def bounds_its_workers(roles: frozenset[str] | set[str]) -> bool:
    """Whether an account's own profile would bound the workers it registers: a service
    account that is not an admin (as ``account_bounds`` reads it; other roles register no
    service workers)."""
    return Role.WORKER_SERVICE in roles and Role.ADMIN not in roles


def account_bounds(username: str) -> dict | None:
    """The profile bounding the SERVICE and INSTRUMENT_ADAPTER workers an account registers
    (RULES.md#service-workers): the account's stored profile; None when it has none (its
    workers are bounded by its role alone) or is an admin. One query."""
    return accounts_bounds([username]).get(username)


def accounts_bounds(usernames: list[str]) -> dict[str, dict]:
    """``account_bounds`` of several accounts (those bounded only). One query."""
    return {row["username"]: {**{name: list(row[name] or []) for name in LIST_FIELDS},
                              "max_concurrent_leases": row["max_concurrent_leases"]}
            for row in fetch_all(_ACCOUNT_BOUNDS, {"usernames": list(usernames),
                                                   "admin": Role.ADMIN.value},
                                 prepare="account_bounds")}


def outside_profiles(workers: list) -> dict[str, str]:
    """euid -> what reaches past its account's profile, for each service or instrument
    worker not retired whose claims are refused for it (RULES.md#service-workers): what
    the workers page flags. One query."""
    from bloomops.execution.policy import readable_worker

    serving = [w for w in workers if w.props.get("worker_type") != WorkerType.HUMAN_SESSION
               and w.props.get("status") != WorkerStatus.RETIRED
               and isinstance(w.props.get("owner_username"), str)]
    bounds = accounts_bounds(sorted({w.props["owner_username"] for w in serving}))
    out = {}
    for w in serving:
        if (owner := bounds.get(w.props["owner_username"])) and (
                beyond := beyond_bounds(readable_worker(w.props), owner)):
            out[w.euid] = beyond_said(beyond)
    return out


def beyond_said(beyond: list[tuple[str, str]]) -> str:
    """What ``beyond_bounds`` found, as a refusal and the workers page say it."""
    return "; ".join(what for _, what in beyond)


def beyond_bounds(worker: dict, bounds: dict) -> list[tuple[str, str]]:
    """(field, what) for each way a worker's capabilities, scopes or lease limit reach past
    its account's profile: a capability the profile lacks, a scope value outside the
    profile's or an empty scope (any) where the profile names some, a larger lease limit."""
    out: list[tuple[str, str]] = []
    extra = [c for c in worker.get("capabilities") or [] if c not in bounds["capabilities"]]
    if extra:
        out.append(("capabilities", f"capabilities {', '.join(extra)}"))
    for name in SCOPE_FIELDS:
        allowed, own = bounds[name], worker.get(name) or []
        word = name.removesuffix("_scope")
        if allowed and not own:
            out.append((name, f"every {word} (an empty {name})"))
        elif allowed and (extra := [v for v in own if v not in allowed]):
            out.append((name, f"{word} {', '.join(extra)}"))
    limit = worker.get("max_concurrent_leases")
    if isinstance(limit, int) and limit > bounds["max_concurrent_leases"]:
        out.append(("max_concurrent_leases", f"a lease limit of {limit}"))
    return out


def bounds_said(bounds: dict) -> str:
    """An account's profile as a refusal states what it allows."""
    scopes = "; ".join(f"{name.removesuffix('_scope')}s {', '.join(bounds[name])}"
                       for name in SCOPE_FIELDS if bounds[name])
    return (f"capabilities {', '.join(bounds['capabilities']) or '(none)'}"
            f"{'; ' + scopes if scopes else ''}; at most {bounds['max_concurrent_leases']}"
            " leases")
