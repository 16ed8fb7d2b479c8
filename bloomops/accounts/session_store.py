"""Sessions kept under a keyed digest of their cookie (docs/DEPLOY.md, "Sign-in, sessions and
tokens").

Django's database sessions store the cookie's value itself as the row's key, so anyone who can
read the table (a reporting role, a backup, another application's service on the same
database) could take over every person signed in. Here the row is stored under an HMAC of the
cookie's value keyed by the secret key, which the database never holds, and names its person
(``user_id``), so ending a person's sessions reads theirs only. Rotating the secret key ends
every session (a fallback key is not tried: a session is signed in again, not carried over).

A person's requests overlap (two tabs, a page's polling, a double click), and Django saves a
session whole, as the request read it: the last to end wrote back what the others had
stored meanwhile (a manifest's results, the token form's guard). Saving here writes only what
this request changed, over the session as it is stored then (``SessionStore.save``), and
what may be done once per session is claimed in the stored session (``add_once``).
"""

from __future__ import annotations

import copy
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.base import UpdateError
from django.contrib.sessions.backends.db import SessionStore as DatabaseStore
from django.contrib.sessions.exceptions import SessionInterrupted
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from bloomops.accounts.sessions import ACTIVITY_KEY

SALT = "bloomops.accounts.session"


def stored_key(session_key: str) -> str:
    """The row's key for a cookie's session key: 40 hex digits of an HMAC-SHA256."""
    return salted_hmac(SALT, session_key, algorithm="sha256").hexdigest()[:40]


def signed_in_user_id(data: dict) -> int | None:
    value = data.get(SESSION_KEY)
    return int(value) if isinstance(value, str) and value.isdigit() else None


class SessionStore(DatabaseStore):
    # the data as this request read it, and its stored text: what differs from it at saving
    # is this request's
    _as_read: dict[str, Any] | None = None
    _read_text: str | None = None

    @classmethod
    def get_model_class(cls):
        from bloomops.accounts.models import StoredSession

        return StoredSession

    def load(self) -> dict[str, Any]:
        row = self._get_session_from_db()
        data = self.decode(row.session_data) if row else {}
        self._as_read, self._read_text = copy.deepcopy(data), row.session_data if row else None
        return data

    def stored(self) -> dict[str, Any]:
        """The session as stored now (another request may have saved since this one read
        it)."""
        row = self.model.objects.filter(session_key=stored_key(self.session_key or "")).first()
        return self.decode(row.session_data) if row else {}

    def save(self, must_create: bool = False) -> None:
        if must_create or self.session_key is None or self._read_text is None:
            super().save(must_create=must_create)
            self._remember(self._session_cache)
            return
        mine = self.create_model_instance(self._get_session())
        # as it was read (the usual case): one statement, as Django's own save
        if self.model.objects.filter(
                session_key=mine.session_key, session_data=self._read_text).update(
                session_data=mine.session_data, expire_date=mine.expire_date,
                user_id=mine.user_id):
            self._remember(self._session_cache, mine.session_data)
            return
        self._merge(lambda stored: self._changes_onto(stored))

    def add_once(self, key: str, item: str, keep: int) -> bool:
        """Add ``item`` to the list under ``key`` (its newest ``keep``), as stored now, unless
        it is there already (False): what a form may do once per session is claimed so, and
        of two requests sent at once (a double click) only one claims it."""
        added = False

        def add(stored: dict[str, Any]) -> dict[str, Any]:
            nonlocal added
            listed = stored.get(key)
            listed = listed if isinstance(listed, list) else []
            added = item not in listed
            return {**stored, key: [*listed, item][-keep:]} if added else stored

        self._merge_now(add)
        return added

    def discard_once(self, key: str, item: str) -> None:
        """Take ``item`` out of the list under ``key`` as stored now (what ``add_once`` claimed
        and was not done after all), leaving what other requests claimed meanwhile; written
        at once, whatever becomes of this request's answer."""
        def discard(stored: dict[str, Any]) -> dict[str, Any]:
            listed = stored.get(key)
            if not isinstance(listed, list) or item not in listed:
                return stored
            return {**stored, key: [x for x in listed if x != item]}

        self._merge_now(discard)

    def _merge_now(self, change) -> None:
        """``_merge`` from a view: a session ended meanwhile (signed out in another tab) is
        Django's 400, as its middleware says it, not a 500."""
        try:
            self._merge(change)
        except UpdateError:
            raise SessionInterrupted("The session ended while this request ran: sign in"
                                     " again.") from None

    def _changes_onto(self, stored: dict[str, Any]) -> dict[str, Any]:
        """This request's changes (against what it read) over the session as stored; of two
        last-activity times the later stays (a long request ending after a newer one)."""
        mine, then = self._get_session(), self._as_read or {}
        merged = dict(stored)
        for key in set(mine) | set(then):
            if key not in mine:
                merged.pop(key, None)
            elif key not in then or mine[key] != then[key]:
                merged[key] = mine[key]
        if isinstance(mine.get(ACTIVITY_KEY), int | float) \
                and isinstance(stored.get(ACTIVITY_KEY), int | float):
            merged[ACTIVITY_KEY] = max(mine[ACTIVITY_KEY], stored[ACTIVITY_KEY])
        return merged

    def _merge(self, change) -> None:
        """The stored session, locked, changed by ``change`` (this request's own changes kept
        as well) and written."""
        with transaction.atomic():
            row = self.model.objects.select_for_update().filter(
                session_key=stored_key(self.session_key or "")).first()
            if row is None:  # ended meanwhile (signed out elsewhere): as Django says it
                raise UpdateError
            merged = change(self._changes_onto(self.decode(row.session_data)))
            written = self.create_model_instance(merged)
            written.save(force_update=True)
        self._session_cache = merged
        self._remember(merged, written.session_data)

    def _remember(self, data: dict[str, Any], text: str | None = None) -> None:
        self._as_read = copy.deepcopy(data)
        self._read_text = text if text is not None else self.encode(data)

    # the session this request's cookie names ended by its idle time (its row outlived it)
    ended_idle = False

    def _get_session_from_db(self):
        found = self.model.objects.filter(session_key=stored_key(self.session_key)).first()
        if found is not None and found.expire_date <= timezone.now():
            # said once (IdleSessionMiddleware), then gone: a sign-out or an admin deletes
            # the row, so one that expired went idle
            self.ended_idle = True
            found.delete()
            found = None
        if found is None:
            self._session_key = None
        return found

    def exists(self, session_key: str) -> bool:
        return self.model.objects.filter(session_key=stored_key(session_key)).exists()

    def create_model_instance(self, data: dict):
        row = super().create_model_instance(data)
        row.session_key = stored_key(row.session_key)
        row.user_id = signed_in_user_id(data)
        return row

    def delete(self, session_key: str | None = None) -> None:
        session_key = session_key or self.session_key
        if session_key is not None:
            self.model.objects.filter(session_key=stored_key(session_key)).delete()

    # bloomops serves WSGI; the async forms do the same work, not Django's unkeyed lookups
    async def _aget_session_from_db(self):
        return await sync_to_async(self._get_session_from_db)()

    async def aexists(self, session_key: str) -> bool:
        return await sync_to_async(self.exists)(session_key)

    async def acreate_model_instance(self, data: dict):
        await self._aget_or_create_session_key()
        return self.create_model_instance(data)

    async def adelete(self, session_key: str | None = None) -> None:
        await sync_to_async(self.delete)(session_key)


def end_user_sessions(user_id: int) -> int:
    """Every unexpired session signed in as the person ends (their rows are deleted); how
    many."""
    ended, _ = SessionStore.get_model_class().objects.filter(
        user_id=user_id, expire_date__gt=timezone.now()).delete()
    return ended
