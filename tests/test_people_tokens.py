"""API tokens on a person's page (docs/RULES.md#api-tokens): an admin gives one, sees it once,
and revokes it, each with a reason in the person's change record; until now a token could only
be given from a shell on the server."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from bloomops.accounts.models import COMMAND_LINE, ApiToken, ProfileChange
from bloomops.accounts.tokens import TOKEN_PREFIX, create_token
from tests.api_helpers import Api
from tests.engine import GIVEN
from tests.web_support import form_for, signed_in

TOKEN = re.compile(r"bo_[0-9a-f]{8}_[\w-]{20,}")


def _written() -> tuple:
    """Everything giving or revoking a token writes."""
    return (ProfileChange.objects.count(),
            sorted(ApiToken.objects.values_list("id", "revoked_at")))


def _give(client, username: str, **overrides):
    page = client.get(f"/people/{username}/")
    fields = form_for(page, f"/people/{username}/tokens/", **overrides)
    return client.post(f"/people/{username}/tokens/", fields)


def test_an_admin_gives_a_token_that_is_shown_once_and_recorded(client, users):
    admin = signed_in(client, users["admin"])
    answer = _give(admin, "svc", name="extractor-01", days="30",
                   reason="the extraction robot's adapter")
    assert answer.status_code == 201
    assert "no-store" in answer["Cache-Control"]  # the page holding the token is not kept
    token = TOKEN.search(answer.content.decode()).group(0)
    # it works as the service account, and for no longer than asked
    assert Api(token).get("/queues").status_code == 200
    row = ApiToken.objects.get(user=users["worker_service"])
    assert row.name == "extractor-01"
    assert round((row.expires_at - row.created_at).total_seconds() / 86400) == 30
    # recorded with who and why, naming the token by prefix and name, never the token
    change = ProfileChange.objects.get(username="svc")
    assert change.changed_by == "adm" and change.reason == "the extraction robot's adapter"
    assert change.after["api_token"].startswith(f"bo_{row.prefix}… “extractor-01” given")
    assert token not in str(change.after)
    # never shown again: the page lists it by prefix only
    again = admin.get("/people/svc/").content.decode()
    assert token not in again and f"bo_{row.prefix}…" in again and "active" in again
    assert "by adm" in again
    assert "no second person to approvals svc asks for" in answer.content.decode()
    people = admin.get("/people/").content.decode()
    assert 'href="/people/svc/#api-tokens">1 active</a>' in people


def test_an_admin_revokes_a_token_on_the_page_and_it_is_refused_from_then_on(client, users):
    row, token = create_token("svc", name="old adapter", **GIVEN)
    other, other_token = create_token("svc", name="kept", **GIVEN)
    admin = signed_in(client, users["admin"])
    page = admin.get("/people/svc/")
    action = f"/people/svc/tokens/{row.pk}/revoke/"
    answer = admin.post(action, form_for(page, action, reason="the adapter was replaced"))
    assert answer.status_code == 302 and answer["Location"] == "/people/svc/#api-tokens"
    assert Api(token).get("/queues").status_code == 401
    assert Api(other_token).get("/queues").status_code == 200  # only the one chosen
    change = ProfileChange.objects.filter(username="svc").latest("id")
    assert (change.changed_by, change.reason) == ("adm", "the adapter was replaced")
    assert change.diff() == [("api_token", f"bo_{row.prefix}… “old adapter” active",
                              f"bo_{row.prefix}… “old adapter” revoked")]
    # a revoked token offers no revoke form, and a second revoke writes nothing
    assert action not in admin.get("/people/svc/").content.decode()
    before = _written()
    again = admin.post(action, {"reason": "twice"}, follow=True)
    assert "was already revoked" in again.content.decode()
    assert _written() == before


@pytest.mark.parametrize("role", ["worker_service", "worker_human", "operator"])
def test_only_admins_give_or_revoke_tokens(client, users, role):
    row, token = create_token("svc", **GIVEN)
    before = _written()
    someone = signed_in(client, users[role])
    assert someone.post("/people/svc/tokens/", {"days": "30", "reason": "mine"}
                        ).status_code == 403
    assert someone.post(f"/people/svc/tokens/{row.pk}/revoke/", {"reason": "x"}
                        ).status_code == 403
    assert _written() == before
    assert Api(token).get("/queues").status_code == 200


@pytest.mark.parametrize(("fields", "field", "said"), [
    ({"reason": ""}, "reason", "Say why"),
    ({"reason": "\u200b"}, "reason", "Say why"),
    ({"days": "0"}, "days", "greater than or equal to 1"),
    ({"days": "3651"}, "days", "less than or equal to 3650"),
    ({"days": "soon"}, "days", "Enter a whole number"),
    ({"name": "ci\x1b[2J"}, "name", "printable"),
    ({"name": "x" * 101}, "name", "at most 100 characters"),
])
def test_a_refused_token_says_why_and_writes_nothing(client, users, fields, field, said):
    admin = signed_in(client, users["admin"])
    before = _written()
    answer = _give(admin, "svc", **{"days": "30", "reason": "a reason", **fields})
    assert answer.status_code == 400
    errors = answer.context["token_form"].errors
    assert said in " ".join(errors[field]) and not TOKEN.search(answer.content.decode())
    assert _written() == before
    # said at the top too: the page came back at its top, the field's words far below
    assert 'id="token-refused"' in answer.content.decode()
    assert 'id="person-refused"' not in answer.content.decode()


def test_no_token_for_someone_who_may_not_sign_in(client, users):
    User.objects.filter(username="svc").update(is_active=False)
    admin = signed_in(client, users["admin"])
    page = admin.get("/people/svc/").content.decode()
    assert 'id="token-form"' not in page and "they are given no token" in page
    before = _written()
    answer = admin.post("/people/svc/tokens/", {"days": "30", "reason": "a reason"})
    assert answer.status_code == 400
    assert "may not sign in" in " ".join(answer.context["token_form"].non_field_errors())
    assert _written() == before


def test_a_token_is_revoked_only_on_its_own_persons_page(client, users):
    theirs, token = create_token("op", **GIVEN)
    admin = signed_in(client, users["admin"])
    before = _written()
    assert admin.post(f"/people/svc/tokens/{theirs.pk}/revoke/", {"reason": "x"}
                      ).status_code == 404
    assert admin.post(f"/people/nobody/tokens/{theirs.pk}/revoke/", {"reason": "x"}
                      ).status_code == 404
    assert admin.post("/people/nobody/tokens/", {"days": "30", "reason": "x"}).status_code == 404
    assert _written() == before
    assert Api(token).get("/queues").status_code == 200


def test_a_revoke_without_a_reason_is_refused(client, users):
    row, token = create_token("svc", **GIVEN)
    admin = signed_in(client, users["admin"])
    before = _written()
    for reason in ("  ", "\u200b"):  # blank, or only what shows as nothing
        answer = admin.post(f"/people/svc/tokens/{row.pk}/revoke/", {"reason": reason})
        said = [str(m) for m in get_messages(answer.wsgi_request)]
        assert answer.status_code == 400 and "was not revoked: Say why" in said[0]
    assert _written() == before
    assert Api(token).get("/queues").status_code == 200


def test_tokens_given_and_revoked_from_a_shell_are_recorded_as_the_command_line(users, capsys):
    call_command("create_api_token", "svc", "--name", "nightly")
    capsys.readouterr()
    call_command("revoke_api_token", "--user", "svc")
    given, revoked = ProfileChange.objects.filter(username="svc").order_by("id")
    assert given.changed_by == revoked.changed_by == COMMAND_LINE
    assert given.reason.startswith("manage.py create_api_token, run as")
    assert revoked.reason.startswith("manage.py revoke_api_token, run as")
    assert "“nightly” given" in given.after["api_token"]
    assert revoked.after["api_token"].endswith("revoked")
    # the UI asks why; the command takes it too, kept with who ran it
    call_command("create_api_token", "svc", "--reason", "the nightly LIMS sync")
    capsys.readouterr()
    call_command("revoke_api_token", "--user", "svc", "--reason", "sync retired")
    given, revoked = ProfileChange.objects.filter(username="svc").order_by("id")[2:]
    assert given.reason.startswith("the nightly LIMS sync (manage.py create_api_token, run as")
    assert revoked.reason.startswith("sync retired (manage.py revoke_api_token, run as")
    # a reason no record may hold, or nothing to revoke, is said, not a traceback or exit 0
    before = ProfileChange.objects.count()
    for args in (["--user", "svc", "--reason", "x\x1b[31m"], ["999999"], ["--user", "nobody"]):
        with pytest.raises(CommandError):
            call_command("revoke_api_token", *args)
    assert ProfileChange.objects.count() == before


def test_revoking_again_is_done_already_not_a_failure(users, capsys):
    """An offboarding script run twice failed its second run (exit 1) though what it asked
    holds: a token revoked already, or a person with no working token, is said and exit 0."""
    row, _ = create_token("svc", **GIVEN)
    call_command("revoke_api_token", str(row.pk))
    capsys.readouterr()
    before = ProfileChange.objects.count()
    for args in ([str(row.pk)], ["--prefix", row.prefix], ["--user", "svc"], ["--user", "sci"]):
        call_command("revoke_api_token", *args)
        assert "none of them is active" in capsys.readouterr().out
    assert ProfileChange.objects.count() == before
    for args in (["--prefix", "nosuchprefix"], ["--user", "nobody"]):
        with pytest.raises(CommandError, match="no token or person matches"):
            call_command("revoke_api_token", *args)


def test_a_token_is_revoked_by_its_prefix_as_the_pages_show_it(users, capsys):
    """The person's page and the list show "bo_e776d7ea…"; revoking by that matched no token
    ("no token or person matches that")."""
    for shown in (lambda r: f"{TOKEN_PREFIX}{r.prefix}…", lambda r: f"{TOKEN_PREFIX}{r.prefix}",
                  lambda r: f" {r.prefix} ", lambda r: f"{TOKEN_PREFIX}{r.prefix}..."):
        row, _ = create_token("svc", **GIVEN)
        call_command("revoke_api_token", "--prefix", shown(row))
        assert "Revoked 1 token(s)." in capsys.readouterr().out
        row.refresh_from_db()
        assert row.revoked_at is not None


def test_a_blank_token_name_is_no_name_and_a_misspelt_person_lists_nothing_said(users, capsys):
    """A name of spaces was kept and listed as a token called nothing; listing the tokens of
    a person who does not exist printed an empty list and exit 0."""
    row, _ = create_token("svc", **{**GIVEN, "name": "   "})
    assert row.name == ""
    with pytest.raises(CommandError, match="No person 'nosuch'"):
        call_command("list_api_tokens", "--user", "nosuch")
    call_command("list_api_tokens", "--user", "svc")
    assert f"{row.prefix}\tsvc\t-\t" in capsys.readouterr().out

def test_after_a_token_is_given_the_persons_form_still_saves_the_person(client, users):
    """The page that shows the token lives at /tokens/: the person form on it, which named
    no action, was sent there, refused, and the admin's change lost."""
    admin = signed_in(client, users["admin"])
    given = _give(admin, "svc", days="30", reason="adapter")
    fields = form_for(given, "/people/svc/", reason="now also an operator")
    fields["roles"] = ["worker_service", "operator"]
    answer = admin.post("/people/svc/", fields)
    assert answer.status_code == 302
    assert sorted(users["worker_service"].groups.values_list("name", flat=True)) == [
        "operator", "worker_service"]


def test_every_working_token_is_listed_however_many_ended_since(client, users):
    """The list stopped at the newest 50: a working token behind 50 rotated ones had no
    revoke button, though the People list counted it."""
    old, _ = create_token("svc", name="the old adapter", **GIVEN)
    for _ in range(51):
        row, _ = create_token("svc", **GIVEN)
        ApiToken.objects.filter(pk=row.pk).update(revoked_at=row.created_at)
    page = signed_in(client, users["admin"]).get("/people/svc/").content.decode()
    assert f"/people/svc/tokens/{old.pk}/revoke/" in page


def test_a_token_about_to_expire_is_named_to_admins_before_its_calls_are_refused(
        client, users):
    """A service's 90-day token ran out unannounced: its calls answered 401 and the queue
    stalled until someone noticed. The console now names it while there is time."""
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    soon, _ = create_token("svc", name="plate reader", days=90, **GIVEN)
    ApiToken.objects.filter(pk=soon.pk).update(created_at=now - timedelta(days=87),
                                               expires_at=now + timedelta(days=3, minutes=30))
    create_token("svc", name="far off", days=90, **GIVEN)  # 90 days left: nothing said
    week, _ = create_token("svc", name="weekly", days=7, **GIVEN)  # a week-long token
    revoked, _ = create_token("op", name="gone", days=90, **GIVEN)
    ApiToken.objects.filter(pk=revoked.pk).update(created_at=now - timedelta(days=88),
                                                  expires_at=now + timedelta(days=2),
                                                  revoked_at=now)
    admin = signed_in(client, users["admin"])
    dashboard = admin.get("/").content.decode()
    said = dashboard.split('id="tokens-expiring"')[1].split("</p>")[0]
    assert "svc’s “plate reader”" in said and ">in 3 d</span> " in said, said
    assert "far off" not in said and "weekly" not in said and "gone" not in said
    people = admin.get("/people/").content.decode()
    row = people.split('data-person="svc"')[1].split("</tr>")[0]
    assert "3 active" in row and "plate reader expires" in row and "weekly" not in row
    assert "expiring" not in people.split('data-person="op"')[1].split("</tr>")[0]
    page = admin.get("/people/svc/").content.decode()
    listed = page.split('id="token-list"')[1].split("</table>")[0]
    assert listed.count("give svc a new one, then revoke this") == 1
    # the week-long token in its last day is about to expire too
    ApiToken.objects.filter(pk=week.pk).update(created_at=now - timedelta(days=6, hours=4),
                                               expires_at=now + timedelta(hours=20))
    assert "svc’s “weekly”" in admin.get("/").content.decode()
    # an operator's dashboard says nothing of tokens
    assert 'id="tokens-expiring"' not in signed_in(Client(), users["operator"]).get(
        "/").content.decode()


def test_a_reloaded_token_form_gives_no_second_token(client, users):
    """The page that shows a new token answers a POST: a reload sent the form again and gave
    a second working token without a word, which nobody copied or meant to give."""
    admin = signed_in(client, users["admin"])
    page = admin.get("/people/svc/")
    fields = form_for(page, "/people/svc/tokens/", name="robot", days="30", reason="robot")
    first = admin.post("/people/svc/tokens/", fields)
    assert first.status_code == 201 and TOKEN.search(first.content.decode())
    assert 'id="token-value"' in first.content.decode() and " autofocus" in \
        first.content.decode().split('id="token-value"')[1].split(">")[0]
    before = _written()
    again = admin.post("/people/svc/tokens/", fields)
    assert again.status_code == 302 and again["Location"] == "/people/svc/#api-tokens"
    assert "That form was sent before" in " ".join(
        m.message for m in get_messages(again.wsgi_request))
    assert _written() == before and ApiToken.objects.filter(user=users["worker_service"]
                                                            ).count() == 1
    # a fresh form gives another, as asked
    fresh = form_for(admin.get("/people/svc/"), "/people/svc/tokens/", name="second",
                     reason="a second robot")
    assert admin.post("/people/svc/tokens/", fresh).status_code == 201
    assert ApiToken.objects.filter(user=users["worker_service"]).count() == 2
