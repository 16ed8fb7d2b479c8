"""How a worker talks to bloomops: directly to the executor (same process and database, the
default for workers deployed beside the server) or over the JSON API (remote workers and
instrument adapters). Both raise ActionError with the API's error codes, so the runtime is
the same either way; a transport that cannot get an answer at all raises TransportError (a
fault the runtime backs off from, bloomops/worker/faults.py)."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any, Protocol

from bloomops.execution.actions import ACTIONS
from bloomops.execution.context import ENVELOPE_FIELDS
from bloomops.execution.errors import HTTP_STATUS, ActionError

# What goes at the top level of an action's JSON body; the rest is its payload.
ENVELOPE = ("idempotency_key", *ENVELOPE_FIELDS)


class TransportError(Exception):
    """No usable answer: unreachable, timed out, a 5xx, or a body that is not the API's JSON.
    Whether the request took effect is unknown, so it is retried with the same idempotency
    key."""


class Transport(Protocol):
    def act(self, action_key: str, *, payload: dict | None = None, **fields: Any) -> dict: ...

    def subject(self, euid: str) -> dict: ...

    def queue(self, queue_key: str) -> dict: ...

    def history(self, euid: str) -> dict: ...

    def close(self) -> None: ...


class DirectTransport:
    """Calls the executor and the selectors in this process, as a given Django user."""

    def __init__(self, username: str) -> None:
        self.username = username
        self._actor = None

    @property
    def actor(self):
        """Looked up on first use, so a worker started while the database is down waits for
        it (the runtime retries register) instead of failing in its constructor."""
        if self._actor is None:
            from django.contrib.auth import get_user_model

            from bloomops.execution.executor import Actor

            user = get_user_model().objects.filter(username=self.username).first()
            if user is None:
                raise ActionError("UNAUTHENTICATED", f"No user {self.username!r}.")
            self._actor = Actor.of(user)
        return self._actor

    def act(self, action_key: str, *, payload: dict | None = None, **fields: Any) -> dict:
        from bloomops.execution.executor import ActionRequest, execute

        result = execute(ActionRequest(action_key=action_key, actor=self.actor,
                                       payload=payload or {}, **fields))
        return result.as_dict()

    def subject(self, euid: str) -> dict:
        from bloomops.execution import selectors

        d = selectors.subject_diagnostics(euid)
        if d is None:
            raise ActionError("NOT_FOUND", subject_euid=euid)
        return {"euid": d.euid, "name": d.name, "template_code": d.template_code,
                "state": d.state, "revision": d.revision, "execution": d.execution,
                "properties": {k: v for k, v in d.props.items() if k != "execution"}}

    def queue(self, queue_key: str) -> dict:
        from bloomops.execution import selectors

        row = selectors.queue_config(queue_key)
        if row is None:
            raise ActionError("NOT_FOUND", queue_key=queue_key)
        return {"queue_key": queue_key, "config": row["config"]}

    def history(self, euid: str) -> dict:
        from bloomops.execution import selectors

        d = selectors.subject_diagnostics(euid)
        if d is None:
            raise ActionError("NOT_FOUND", subject_euid=euid)
        h = selectors.subject_history(d.uid)
        return {k: [{"euid": r["euid"], "name": r["name"], **(r["props"] or {})} for r in rows]
                for k, rows in h.items()}

    def close(self) -> None:
        from django.db import connection

        connection.close()


class HttpTransport:
    """Calls the JSON API with a bearer token. ``send`` may be replaced (tests pass one that
    goes through Django's test client)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0, send=None) -> None:
        # the server's address, or the API's base path as docs/API.md gives it (either)
        self.base = base_url.rstrip("/").removesuffix("/api/v1/execution").removesuffix(
            "/api/v1") + "/api/v1/execution"
        self.token = token
        self.timeout = timeout
        self.send = send or self._urllib

    def _urllib(self, method: str, url: str, body: bytes | None, headers: dict) -> tuple[int,
                                                                                      bytes]:
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            # URLError (refused, DNS), timeouts and dropped connections (OSError)
            raise TransportError(f"{method} {url}: {exc}") from exc

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        status, raw = self.send(method, self.base + path, data, headers)
        if status >= 500 or status in (408, 429):
            raise TransportError(f"{method} {path}: HTTP {status}")
        try:
            parsed = json.loads(raw or b"{}")
        except ValueError:
            raise TransportError(f"{method} {path}: HTTP {status}, body is not JSON") from None
        if not isinstance(parsed, dict):
            raise TransportError(f"{method} {path}: HTTP {status}, body is not a JSON object")
        if status >= 400:
            err = parsed.get("error")
            err = err if isinstance(err, dict) else {}
            code = err.get("code") if err.get("code") in HTTP_STATUS else "VALIDATION_ERROR"
            message = err.get("message")
            refusal = ActionError(code, message if isinstance(message, str) else None)
            details = err.get("details")
            refusal.details = details if isinstance(details, dict) else {}
            raise refusal
        return parsed

    def act(self, action_key: str, *, payload: dict | None = None, **fields: Any) -> dict:
        body = {k: v for k, v in fields.items() if k in ENVELOPE and v is not None}
        body["payload"] = payload or {}
        return self._call("POST", f"/actions/{ACTIONS[action_key].path}", body)

    def subject(self, euid: str) -> dict:
        return self._call("GET", f"/subjects/{euid}")

    def queue(self, queue_key: str) -> dict:
        return self._call("GET", f"/queues/{queue_key}")

    def history(self, euid: str) -> dict:
        return self._call("GET", f"/subjects/{euid}/history")

    def close(self) -> None:
        pass
