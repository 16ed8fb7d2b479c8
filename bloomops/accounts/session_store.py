"""Sessions kept under a keyed digest of their cookie (docs/DEPLOY.md, "Sign-in, sessions and
tokens").

Django's database sessions store the cookie's value itself as the row's key, so anyone who can
read the table (a reporting role, a backup, another application's service on the same
database) could take over every person signed in. Here the row is stored under an HMAC of the
cookie's value keyed by the secret key, which the database never holds, and names its person
(``user_id``), so ending a person's sessions reads theirs only. Rotating the secret key ends
every session (a fallback key is not tried: a session is signed in again, not carried over).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore as DatabaseStore
from django.utils import timezone
from django.utils.crypto import salted_hmac

SALT = "bloomops.accounts.session"


def stored_key(session_key: str) -> str:
    """The row's key for a cookie's session key: 40 hex digits of an HMAC-SHA256."""
    return salted_hmac(SALT, session_key, algorithm="sha256").hexdigest()[:40]


def signed_in_user_id(data: dict) -> int | None:
    value = data.get(SESSION_KEY)
    return int(value) if isinstance(value, str) and value.isdigit() else None


class SessionStore(DatabaseStore):
    @classmethod
    def get_model_class(cls):
        from bloomops.accounts.models import StoredSession

        return StoredSession

    def _get_session_from_db(self):
        found = self.model.objects.filter(session_key=stored_key(self.session_key),
                                          expire_date__gt=timezone.now()).first()
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
