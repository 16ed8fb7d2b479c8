"""Helpers for API tests: tokens, a bearer client, and JSON calls."""

from __future__ import annotations

import itertools
import json
from typing import Any

from django.test import Client

from bloomops.accounts.tokens import create_token
from tests.engine import GIVEN

_keys = itertools.count(1)


def ikey(prefix: str = "api") -> str:
    return f"{prefix}-{next(_keys)}"


class Api:
    """A JSON client with a bearer token (or none)."""

    def __init__(self, token: str | None = None) -> None:
        self.client = Client(enforce_csrf_checks=True)
        self.token = token

    def _headers(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.token}"} if self.token else {}

    def get(self, path: str, **params: Any):
        return self.client.get(f"/api/v1/execution{path}", params, **self._headers())

    def post(self, path: str, body: Any):
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return self.client.post(f"/api/v1/execution{path}", data,
                                content_type="application/json", **self._headers())

    def act(self, path: str, **body: Any):
        body.setdefault("idempotency_key", ikey(path))
        return self.post(f"/actions/{path}", body)


def api_for(user) -> Api:
    _, token = create_token(user.username, **GIVEN)
    return Api(token)


def error_code(response) -> str:
    return response.json()["error"]["code"]
