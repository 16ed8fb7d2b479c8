"""Electronic signatures (RULES.md#approvals): the signer proves who they are by entering
their password again, checked as a sign-in would check it. Through a web or API request,
django-axes counts a wrong password as a failed sign-in of that person from that address,
and a locked-out person cannot sign. The password is only compared, never kept."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError

from bloomops.accounts.backends import SignInBackend
from bloomops.text import readable_line

# Longer than any password a person types; refused before the (slow) hash is computed.
MAX_PASSWORD_LENGTH = 4096


def signature_problem(username: str, password: Any, origin: Any = None,
                      doing: str = "signing") -> str | None:
    """Why this password does not sign as ``username`` (None: it does). ``origin`` is the
    HTTP request the signature came with, if any; ``doing``: what a lockout stops, in its
    words."""
    if not isinstance(password, str) or not password:
        return "Enter your password to sign."
    if len(password) > MAX_PASSWORD_LENGTH:
        return "The password does not match."
    if origin is None:
        # A call from inside the process (a management command, a test): no address to count.
        user = SignInBackend().authenticate(None, username=username, password=password)
        return None if user is not None else "The password does not match."
    user = authenticate(origin, username=username, password=password)
    if getattr(origin, "axes_locked_out", False):
        # Our refusal answers; django-axes' lockout page would replace the API's JSON.
        origin.axes_locked_out = False
        minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
        return (f"Too many wrong passwords: {doing} is locked for {minutes} minute"
                f"{'s' if minutes != 1 else ''} after the last wrong one (signing in too);"
                " then try again, or ask an admin to lift it.")
    if user is None or user.get_username() != username:
        return "The password does not match."
    if settings.AXES_RESET_ON_SUCCESS:
        # a right password ends the count of wrong ones, as a sign-in does (authenticate
        # alone never tells django-axes of a success)
        from axes.helpers import get_client_ip_address
        from axes.utils import reset

        reset(ip=get_client_ip_address(origin), username=username)
    return None


def display_name(username: str) -> str:
    """The signer's name as the signature shows it: their full name, else the username."""
    return display_names([username]).get(username, username)


def person_name(user) -> str:
    """A person's full name as bloomops prints it, or "" (readable_line: a name stored by
    another route, createsuperuser or Django's admin, may hold a terminal escape or a
    right-to-left override; a signature or a history never prints one)."""
    return readable_line(user.get_full_name())


def display_names(usernames: Iterable[str]) -> dict[str, str]:
    """Each username's full name, else the username itself (one query): how a history
    names the people in it."""
    from django.contrib.auth.models import User

    wanted = {u for u in usernames if u}
    full = {u.username: person_name(u) for u in User.objects.filter(
        username__in=wanted).only("username", "first_name", "last_name")}
    return {u: full.get(u) or u for u in wanted}


def hold_people(holds: Iterable[dict[str, Any]]) -> dict[str, str]:
    """``display_names`` of who placed each of ``holds`` (rows with their ``props``), who
    released it and, released on an approval, who asked: the holds screens name people as
    the inbox does (one query)."""
    def named(h: dict[str, Any]) -> list[Any]:
        asked = h["props"].get("released_on_approval")
        return [h["props"].get("placed_by_lookup_euid"),
                h["props"].get("released_by_lookup_euid"),
                asked.get("requested_by") if isinstance(asked, dict) else None]

    return display_names(n for h in holds for n in named(h) if isinstance(n, str))


@dataclass(frozen=True)
class Given:
    """Who else set the password a person signs with (``by``); ``until``: the person changed
    it since, less than an approval's lifetime ago, and the link lasts until then (whoever
    set it could have signed in as them and changed it), else None: until they change it."""

    by: str
    until: datetime | None = None

    @property
    def decides_nothing(self) -> bool:
        """Its person decides no approval at all (RULES.md#approvals): the password is not
        yet theirs (whoever gave it could sign as them for anyone), or the shell set it
        lately (who sat there is not known, so there is no pair to refuse)."""
        from bloomops.accounts.models import COMMAND_LINE

        return self.until is None or self.by == COMMAND_LINE


def password_givers(usernames: Iterable[str] | None = None) -> dict[str, Given]:
    """username -> who else set the password they sign with, for the accounts (of
    ``usernames``, else every one) whose latest password record names another person (not
    they themselves, nor the demo's seeding), or whose own change followed such a record
    within an approval's lifetime (``Given.until``). One query (each account's last two)."""
    from django.db.models import F, Window
    from django.db.models.functions import RowNumber
    from django.utils import timezone

    from bloomops.accounts.models import SYSTEM_MAKERS, ProfileChange

    records = ProfileChange.objects.filter(after__has_key="password")
    if usernames is not None:
        records = records.filter(username__in=list(usernames))
    records = records.annotate(nth=Window(RowNumber(), partition_by=[F("username")],
                                          order_by=F("id").desc())).filter(nth__lte=2)
    last: dict[str, list] = {}
    for c in records.order_by("username", "-id").only("username", "changed_by", "changed_at"):
        last.setdefault(c.username, []).append(c)
    lasting = timedelta(seconds=int(settings.BLOOMOPS_APPROVAL_TTL_SECONDS))
    now = timezone.now()
    out: dict[str, Given] = {}
    for username, (latest, *before) in last.items():
        if latest.changed_by not in (username, *SYSTEM_MAKERS):
            out[username] = Given(latest.changed_by)
        elif (latest.changed_by == username and before
              and before[0].changed_by not in (username, *SYSTEM_MAKERS)
              and latest.changed_at + lasting > now):
            out[username] = Given(before[0].changed_by, latest.changed_at + lasting)
    return out


def password_given_by(username: str) -> Given | None:
    """Who else set the password this person signs with, or None: what the console asks
    them to change, and a link set_up_together follows."""
    return password_givers([username]).get(username)


def set_up_together(decider: str, requester: str,
                    since: datetime) -> tuple[str, list[str], list[str]] | None:
    """Whether one account set up both the requester and the decider of an approval (one
    of them may be that account): it gave them, or an account it set up, roles since
    ``since`` (the account made, or its roles changed), or set a password they still sign
    with (whenever: knowing a password does not wear off; one its person has changed since
    is theirs again), or gave the requester an API token that worked within the approval
    lifetime. (that account, its chain down to the requester, its chain down to the
    decider), or None. Only who made whom counts, never two people who both touched one
    account (RULES.md#approvals)."""
    from django.db.models import F

    from bloomops.accounts.models import SYSTEM_MAKERS, ProfileChange
    from bloomops.accounts.tokens import token_givers

    makers: dict[str, set[str]] = {}
    given = (ProfileChange.objects.filter(changed_at__gte=since)
             .exclude(changed_by=F("username")).exclude(changed_by__in=SYSTEM_MAKERS)
             .only("username", "changed_by", "before", "after"))
    for change in given:
        if change.before.get("roles") != change.after.get("roles"):
            makers.setdefault(change.username, set()).add(change.changed_by)
    # a password someone else set, of any age, while it is the one they sign with
    for made, given in password_givers().items():
        makers.setdefault(made, set()).add(given.by)
    # an API token someone else gave the requester, working within the approval lifetime:
    # with it they could ask as the requester, not sign as anyone (a decision is signed with
    # the password), so it links the requester alone, not the accounts above them
    asking = {**makers, requester: makers.get(requester, set())
              | token_givers(since).get(requester, set())}

    def ancestry(who: str, links: dict[str, set[str]]) -> dict[str, list[str]]:
        chains = {who: [who]}
        todo = [who]
        while todo:
            made = todo.pop(0)
            for maker in sorted(links.get(made, ())):
                if maker not in chains:
                    chains[maker] = [maker, *chains[made]]
                    todo.append(maker)
        return chains

    above_requester, above_decider = ancestry(requester, asking), ancestry(decider, makers)
    common = [a for a in above_requester if a in above_decider]
    if decider == requester or not common:
        return None
    nearest = min(common, key=lambda a: len(above_requester[a]) + len(above_decider[a]))
    return nearest, above_requester[nearest], above_decider[nearest]


class CountedPasswordChangeForm(PasswordChangeForm):
    """A person's own password change, its current password checked as a signature is: a
    wrong one counts toward that person's sign-in lockout (django-axes) and a locked-out
    person cannot change it, so a session left open is no unlimited guesser of the
    password that signs their approvals."""

    def __init__(self, user, *args, request=None, **kwargs) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        old = self.cleaned_data.get("old_password")
        problem = signature_problem(self.user.get_username(), old, self.request,
                                    doing="changing it")
        if problem:
            raise ValidationError(problem, code="password_incorrect")
        return old


class CountedPasswordChangeView(PasswordChangeView):
    form_class = CountedPasswordChangeForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}

    def form_valid(self, form):
        from bloomops.accounts.models import ProfileChange
        from bloomops.accounts.sessions import password_now_own

        response = super().form_valid(form)
        password_now_own(self.request)
        # recorded as every password given is: one an admin set is no longer the one they
        # sign with (set_up_together)
        ProfileChange.objects.create(
            username=self.request.user.get_username(),
            changed_by=self.request.user.get_username(), reason="changed their own password",
            before={"password": "as it was"}, after={"password": "their own"})
        return response
