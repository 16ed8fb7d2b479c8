"""People (admins only): each person's roles, sign-in and worker profile (capabilities,
site/platform/assay scopes, lease limit), with the history of changes (RULES.md#human-workers).
A refused change re-renders the form with the reason and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from bloomops.accounts.models import (
    MAX_LEASES_LIMIT,
    SCOPE_FIELDS,
    ApiToken,
    PersonProfile,
    ProfileChange,
)
from bloomops.accounts.profiles import (
    MAX_REASON,
    PersonChange,
    ProfileError,
    add_person,
    change_person,
    last_change_id,
    parse_tokens,
    refuse_without_reason,
    set_password,
)
from bloomops.accounts.roles import (
    ALL_ROLES,
    BENCH_ROLES,
    ROLE_DUTIES,
    Role,
    roles_of,
    stored_roles,
)
from bloomops.accounts.tokens import expiring
from bloomops.execution import people, policy, selectors
from bloomops.web import services
from bloomops.web.views.common import forbidden, not_found

HISTORY_LIMIT = 50
KEEP_UNNAMED = "Save values no queue names yet, as typed"
PROFILE_FORM_FIELDS = ("capabilities", *SCOPE_FIELDS, "max_concurrent_leases")


def admin_only(view: Callable) -> Callable:
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if "admin" not in roles_of(request.user):
            return forbidden(request, "Only admins manage people.")
        return view(request, *args, **kwargs)

    return wrapped


def person_named(username: str):
    """The account a people page's URL names, or None."""
    return get_user_model().objects.filter(username=username).first()


class PersonForm(forms.Form):
    roles = forms.MultipleChoiceField(choices=[(r, r) for r in ALL_ROLES], required=False,
                                      widget=forms.CheckboxSelectMultiple)
    is_active = forms.BooleanField(required=False, label="May sign in")
    use_default = forms.BooleanField(required=False, label="Use the lab-wide default profile")
    capabilities = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(
        attrs={"rows": 3}), help_text="Steps this person may do, comma- or line-separated.")
    site_scope = forms.CharField(required=False, max_length=2000,
                                 help_text="Sites whose items they are handed; empty: any.")
    platform_scope = forms.CharField(required=False, max_length=2000,
                                     help_text="Platforms whose items they are handed; empty: any.")
    assay_scope = forms.CharField(required=False, max_length=2000,
                                  help_text="Assays whose items they are handed; empty: any.")
    max_concurrent_leases = forms.IntegerField(min_value=1, max_value=MAX_LEASES_LIMIT,
                                               required=False, label="Lease limit",
                                               help_text="Items they may hold at once.")
    # required by accounts.profiles.validate, the one home of the rule
    reason = forms.CharField(required=False, max_length=MAX_REASON,
                             widget=forms.Textarea(attrs={"rows": 2}),
                             help_text="Why: recorded with the change.")
    seen_change = forms.IntegerField(required=False, widget=forms.HiddenInput, min_value=0)
    # offered once a save held values no queue names (_refuse_unnamed)
    keep_unnamed = forms.BooleanField(required=False, label=KEEP_UNNAMED)


def _initial(user) -> dict:
    stored = PersonProfile.objects.filter(user=user).first()
    profile = people.human_profile(user.get_username(), roles_of(user))
    return {
        "roles": sorted(stored_roles(user)),
        "is_active": user.is_active,
        "use_default": stored is None,
        "capabilities": "\n".join(profile["capabilities"]),
        **{name: ", ".join(profile[name]) for name in SCOPE_FIELDS},
        "max_concurrent_leases": profile["max_concurrent_leases"],
        "seen_change": last_change_id(user.get_username()),
    }


def _change_of(form: PersonForm, target) -> PersonChange:
    """The change the form asks for. Each field's problem is put on the form, all at once
    (a reason forgotten and a mistyped capability took two tries); the first is raised."""
    data = form.cleaned_data
    found: list[ProfileError] = []

    def checked(check: Callable, *args):
        try:
            return check(*args)
        except ProfileError as err:
            found.append(err)
            return None

    if data["max_concurrent_leases"] is None:
        found.append(ProfileError("VALIDATION_ERROR", "Give a lease limit.",
                                  "max_concurrent_leases"))
    lists = {name: checked(parse_tokens, data[name], name)
             for name in ("capabilities", *SCOPE_FIELDS)}
    checked(refuse_without_reason, data["reason"])
    if not data["use_default"] and not data["keep_unnamed"]:
        found.extend(_unconfirmed_unnamed(target, lists))
    if found:
        for err in found[1:]:
            form.add_error(err.field, err.message)
        raise found[0]
    profile: dict | None = {**lists, "max_concurrent_leases": data["max_concurrent_leases"]}
    if data["use_default"]:
        default = people.default_profile(target.get_username(), roles_of(target))
        stored = PersonProfile.objects.filter(user=target).first()
        shown = [default, stored.worker_fields() if stored else default]
        if not any(all(s[name] == value for name, value in profile.items()) for s in shown):
            # edits an admin would lose without a word
            raise ProfileError("VALIDATION_ERROR", "These values differ from the lab-wide"
                               " default: untick \"use the lab-wide default profile\" to give"
                               " this person a profile of their own.", "use_default")
        profile = None
    return PersonChange(roles=list(data["roles"]), is_active=data["is_active"],
                        profile=profile, reason=data["reason"], seen_change=data["seen_change"])


class NewPersonForm(forms.Form):
    username = forms.CharField(max_length=150, help_text=(
        "Letters a-z and A-Z, digits and . @ + - _; no two people's may differ only in case."))
    first_name = forms.CharField(max_length=150, required=False)
    last_name = forms.CharField(max_length=150, required=False)
    password = forms.CharField(widget=forms.PasswordInput, max_length=128,
                               help_text="They sign in with it; tell them in person.")
    roles = forms.MultipleChoiceField(choices=[(r, r) for r in ALL_ROLES], required=False,
                                      widget=forms.CheckboxSelectMultiple)
    reason = forms.CharField(required=False, max_length=MAX_REASON)


@require_http_methods(["GET", "POST"])
@admin_only
def people_list(request: HttpRequest) -> HttpResponse:
    status = 200
    form = NewPersonForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                add_person(data["username"], first_name=data["first_name"],
                           last_name=data["last_name"], password=data["password"],
                           roles=list(data["roles"]), reason=data["reason"],
                           admin_username=request.user.get_username())
            except ProfileError as err:
                form.add_error(err.field if err.field in form.fields else None, err.message)
            else:
                messages.success(request, f"{data['username']} may now sign in." if data["roles"]
                                 else f"{data['username']} may now sign in, but sees nothing"
                                      " until you give them a role below.")
                return redirect(reverse("person", args=[data["username"]]))
        status = 400
        # the form is at the foot of a long list: the page opens at the first field to fix
        first = next((name for name in form.fields if name in form.errors), None)
        if first is not None and not getattr(form.fields[first].widget,
                                             "allow_multiple_selected", False):
            form.fields[first].widget.attrs["autofocus"] = True
    users = (get_user_model().objects.select_related("worker_profile")
             .prefetch_related("groups").order_by("username")
             .annotate(active_tokens=Count("api_tokens", filter=ApiToken.working(
                 timezone.now(), via="api_tokens__"))))
    soon: dict[int, list] = {}
    for token in expiring(timezone.now()):
        soon.setdefault(token.user_id, []).append(token)
    rows = []
    for u in users:
        roles = stored_roles(u)
        # a profile works at the bench (the rostered are worker_human,
        # people.rostered_people) and, an own one, as a service account's bounds
        own = hasattr(u, "worker_profile")
        service = people.bounds_its_workers(roles)
        rows.append({"user": u, "roles": sorted(roles), "own": own, "service": service,
                     "expiring": soon.get(u.pk, []),
                     "bounded": service and own, "bench": Role.WORKER_HUMAN in roles,
                     "profile": people.effective_profile(u.get_username(), roles,
                                                         getattr(u, "worker_profile", None))})
    return render(request, "web/people.html", {"rows": rows, "new": form,
                                               "role_duties": ROLE_DUTIES.items()},
                  status=status)


@require_http_methods(["GET", "POST"])
@admin_only
def person(request: HttpRequest, username: str) -> HttpResponse:
    target = person_named(username)
    if target is None:
        return not_found(request, f"No person {username}.")
    status = 200
    if request.method == "POST":
        form = PersonForm(request.POST)
        if form.is_valid():
            try:
                done = change_person(target.pk, _change_of(form, target),
                                     admin_username=request.user.get_username())
            except ProfileError as err:
                form.add_error(err.field if err.field in form.fields else None, err.message)
                status = 409 if err.code == "REVISION_CONFLICT" else 400
            else:
                if done is None:
                    messages.info(request, "Nothing changed, so nothing was recorded.")
                else:
                    said = ", ".join(FIELD_WORDS.get(f, f) for f in done.changed_fields())
                    if done.before.get("is_active") and not done.after.get("is_active"):
                        messages.success(request, f"{username} can no longer sign in: their"
                                         " sessions ended and their API tokens were revoked.")
                    elif people.bounds_its_workers(stored_roles(target)):
                        # a service account's workers keep what they registered with: one
                        # beyond the new bounds is refused, not changed (RULES.md#service-workers)
                        messages.success(request, f"{username} changed: {said}. Their"
                                         " service workers are held to it from now on: one"
                                         " registered beyond it has its claims refused until"
                                         " it registers again within it (Workers names"
                                         " them).")
                    else:
                        messages.success(request, f"{username} changed: {said}. Their worker"
                                         " takes the new profile the next time they act.")
                    for warning in _unnamed(done.after):
                        messages.warning(request, warning)
                    if left := _claims_left(target, done):
                        messages.warning(request, left)
                return redirect(reverse("person", args=[username]))
        else:
            status = 400
    else:
        form = None
    return person_page(request, target, form, status=status)


def person_page(request: HttpRequest, target, form: PersonForm | None = None, *,
                status: int = 200, **extra) -> HttpResponse:
    """A person's page: the form (``form``, else their values now), their API tokens
    (views/tokens.py) and their change history."""
    from bloomops.web.views.tokens import TokenForm, tokens_of

    form = form or PersonForm(initial=_initial(target))
    named = _named_by_queues()
    roles = stored_roles(target)
    profile = people.human_profile(target.get_username(), roles)
    tokens = tokens_of(target)
    # what the page's confirmations name: what taking sign-in or the bench role away leaves
    _, held = services.open_claims(target)
    return render(request, "web/person.html", {
        "person": target, "form": form,
        # each list with what the queues name, and the person's values none names (said
        # on every visit, not only once when saved)
        "profile_fields": [(form[name], named.get(name), [
            v for v in profile.get(name) or [] if v not in named.get(name, [])]
            if name in named else []) for name in PROFILE_FORM_FIELDS],
        "own_profile": PersonProfile.objects.filter(user=target).exists(),
        # an admin claims with their profile too (accounts.roles.BENCH_ROLES), though no
        # queue's roster counts on them: said apart from one it does nothing for
        "at_bench": bool(roles & BENCH_ROLES), "rostered": Role.WORKER_HUMAN in roles,
        # a service account's profile bounds its workers (RULES.md#service-workers)
        "service": people.bounds_its_workers(roles),
        "history": ProfileChange.objects.filter(username=target.get_username())[:HISTORY_LIMIT],
        "tokens": tokens, "token_form": TokenForm(), "held": held,
        "live_tokens": sum(1 for t in tokens if t["status"] == "active"),
        **extra,
    }, status=status)


class PasswordForm(forms.Form):
    password = forms.CharField(widget=forms.PasswordInput, max_length=128,
                               label="New password", help_text="Tell them in person.")
    reason = forms.CharField(max_length=MAX_REASON, label="Reason")


@require_POST
@admin_only
def person_password(request: HttpRequest, username: str) -> HttpResponse:
    """An admin sets a person's new password (accounts.profiles.set_password)."""
    target = person_named(username)
    if target is None:
        return not_found(request, f"No person {username}.")
    form = PasswordForm(request.POST)
    if form.is_valid():
        try:
            set_password(target.pk, form.cleaned_data["password"],
                         reason=form.cleaned_data["reason"],
                         admin_username=request.user.get_username())
        except ProfileError as err:
            messages.error(request, err.message)
        else:
            messages.success(request, f"{username} has a new password; their sessions ended."
                             " Tell it to them in person.")
    else:
        messages.error(request, " ".join(e for errs in form.errors.values() for e in errs))
    return redirect(reverse("person", args=[username]))


def _claims_left(target, done: ProfileChange) -> str:
    """What a person taken from the bench (their worker_human role or their sign-in) still
    holds: their claims stay theirs until their leases run out, and an admin ends them on
    Admin. Said, since the queue's supervisor sees those items as taken."""
    off_bench = (Role.WORKER_HUMAN in (done.before.get("roles") or [])
                 and Role.WORKER_HUMAN not in (done.after.get("roles") or []))
    signed_out = done.before.get("is_active") and not done.after.get("is_active")
    if not (off_bench or signed_out):
        return ""
    worker, held = services.open_claims(target)
    if not held:
        return ""
    return (f"{target.get_username()} still holds {held} claimed item{'s' if held != 1 else ''}:"
            " they stay claimed until their leases run out (then return to their queues), or"
            f" until you end them on Admin, Leases of worker {worker}.")


# A change record's fields as the person page's form names them.
FIELD_WORDS = {"roles": "roles", "is_active": "sign-in", "own_profile": "own profile",
               "capabilities": "capabilities", "site_scope": "sites",
               "platform_scope": "platforms", "assay_scope": "assays",
               "max_concurrent_leases": "lease limit", "password": "password",
               "api_token": "API token"}


# What the queues name, in a sentence per profile list.
_NAMED_AS = {"capabilities": "No queue asks for {values} yet",
             "site_scope": "No queue is scoped to site {values} yet",
             "platform_scope": "No queue is scoped to platform {values} yet",
             "assay_scope": "No queue is scoped to assay {values} yet"}


def _named_by_queues() -> dict[str, list[str]]:
    """Per profile list, the values the lab's queues name (policy.named_by_queues)."""
    return policy.named_by_queues([q["config"] for q in selectors.queues()])


def _unnamed_values(profile: dict | None) -> dict[str, list[str]]:
    """Per profile list, its values no queue names. Most often they are typos: a scope meets a
    queue's only where they overlap (policy.eligibility_problems), so a misspelt site keeps
    the person from every queue scoped by site."""
    if not profile:
        return {}
    named = _named_by_queues()
    found = {name: [v for v in profile.get(name) or [] if v not in named[name]]
             for name in _NAMED_AS}
    return {name: values for name, values in found.items() if values}


def _unnamed(profile: dict | None) -> list[str]:
    """A warning for each list of a saved profile holding values no queue names (saved as the
    admin confirmed them: a queue may name them later)."""
    return [_NAMED_AS[name].format(values=", ".join(values)) + ": check the spelling."
            for name, values in _unnamed_values(profile).items()]


def _unconfirmed_unnamed(target, lists: dict) -> list[ProfileError]:
    """A save that adds values no queue names is not made until the admin confirms them: a
    typo saved and then warned about had already kept the person from the queues it missed.
    Values the person's profile holds already were confirmed before and are not asked again."""
    now = people.human_profile(target.get_username(), roles_of(target))
    found = []
    for name, values in _unnamed_values(lists).items():
        if new := [v for v in values if v not in (now.get(name) or [])]:
            found.append(ProfileError("VALIDATION_ERROR", _NAMED_AS[name].format(
                values=", ".join(new)) + ": check the spelling, or tick \"" + KEEP_UNNAMED
                + "\" below and save again.", name))
    if found:
        found.append(ProfileError("VALIDATION_ERROR", "Tick this if those values are meant.",
                                  "keep_unnamed"))
    return found
