"""Production mode (DEBUG off), run as a deployment would: `check --deploy` is clean, and a
real gunicorn serves HTTPS-only pages with HSTS, a strict Content-Security-Policy, secure
cookies and a session cookie that dies with the browser."""

from __future__ import annotations

import http.client
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.db import connection

BASE = Path(__file__).resolve().parent.parent
HOST = "lims.lab.example"
CLIENT_PAUSE = 2  # seconds the test server lets a client pause mid-request


def _url(role: dict) -> str:
    d = connection.settings_dict  # the test database
    query = f"host={quote(d['HOST'])}" + (f"&port={d['PORT']}" if d["PORT"] else "")
    return (f"postgresql://{quote(role['USER'])}:{quote(role['PASSWORD'] or '')}"
            f"@/{d['NAME']}?{query}")


def production_env(**extra: str) -> dict[str, str]:
    """What a deployment sets: DEBUG off (unset), its own key and host name, both roles."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BLOOMOPS_", "DJANGO_")) and k != "DATABASE_URL"}
    env.update({"DJANGO_SETTINGS_MODULE": "bloomops.settings",
                "BLOOMOPS_SECRET_KEY": secrets.token_urlsafe(50),
                "BLOOMOPS_TENANT_ID": "0b5e2c1d-6a7f-4e38-9c2d-1ab0a7e5f001",  # its own
                "BLOOMOPS_ALLOWED_HOSTS": HOST, "BLOOMOPS_SEAL_KEYS": secrets.token_urlsafe(50),
                "DATABASE_URL": _url(django_settings.DATABASE_ROLES["owner"]),
                "BLOOMOPS_RUNTIME_DATABASE_URL": _url(django_settings.DATABASE_ROLES["runtime"]),
                **extra})
    return env


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                           "WARNING"], cwd=BASE, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.django_db
@pytest.mark.parametrize("extra", [
    {},  # bloomops terminates TLS itself (or its proxy forwards plain HTTP as such)
    {"BLOOMOPS_BEHIND_TLS_PROXY": "1", "BLOOMOPS_SSL_REDIRECT": "0"},  # the proxy redirects
], ids=["direct", "behind-proxy"])
def test_check_deploy_is_clean_in_production(extra):
    result = check_deploy(production_env(**extra))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.django_db
def test_check_deploy_reports_a_server_connecting_as_the_owner():
    env = production_env()
    del env["BLOOMOPS_RUNTIME_DATABASE_URL"]
    result = check_deploy(env)
    assert result.returncode != 0 and "bloomops.W001" in result.stderr + result.stdout


@pytest.mark.django_db
def test_check_deploy_reports_an_environment_that_forces_the_owner():
    """With two URLs but BLOOMOPS_DB_ROLE=owner in the environment every process connects as
    the owner, and check --deploy said "no issues"."""
    result = check_deploy(production_env(BLOOMOPS_DB_ROLE="owner"))
    assert result.returncode != 0 and "bloomops.W001" in result.stderr + result.stdout


@pytest.mark.django_db
def test_check_deploy_reports_a_seal_key_beside_the_database():
    """A deployment that never set BLOOMOPS_SEAL_KEYS keeps its seal key in var/, beside
    the embedded database's files: check --deploy said "no issues"."""
    env = production_env()
    del env["BLOOMOPS_SEAL_KEYS"]
    result = check_deploy(env)
    assert result.returncode != 0 and "bloomops.W002" in result.stderr + result.stdout


@pytest.mark.django_db
def test_check_deploy_reports_the_demo_tenant():
    """README's "a lab of your own" never set BLOOMOPS_TENANT_ID: the lab's objects went
    under the demo's tenant, and setting it later, as DEPLOY.md says, hid them all."""
    env = production_env()
    del env["BLOOMOPS_TENANT_ID"]
    result = check_deploy(env)
    assert result.returncode != 0 and "bloomops.W003" in result.stderr + result.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def production_server(committed, settings, tmp_path):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's
    # the account made as a deployment's admin would, with its key: the password's seal is
    # the server's to check (accounts/password_seals.py)
    settings.SECRET_KEY = secret_key = secrets.token_urlsafe(50)
    User.objects.create_user("bench-op", password="a-long-bench-password")
    port = _free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "-c", "python:bloomops.serving",
         "bloomops.wsgi:application", "--bind", f"127.0.0.1:{port}"], cwd=BASE,
        # as deployed (bloomops/serving.py), with fewer threads and a shorter pause allowed
        env=production_env(BLOOMOPS_SECRET_KEY=secret_key,
                           BLOOMOPS_BEHIND_TLS_PROXY="1", BLOOMOPS_LOG_LEVEL="INFO",
                           BLOOMOPS_WEB_WORKERS="1", BLOOMOPS_WEB_THREADS="2",
                           BLOOMOPS_CLIENT_TIMEOUT_SECONDS=str(CLIENT_PAUSE)),
        stdout=(tmp_path / "gunicorn.log").open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, "gunicorn exited"
            time.sleep(0.2)
    yield port
    proc.terminate()
    proc.wait(timeout=30)


def request(port: int, method: str, path: str, *, https: bool = True, body: str = "",
            headers: dict | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    all_headers = {"Host": HOST, **({"X-Forwarded-Proto": "https"} if https else {}),
                   **(headers or {})}
    conn.request(method, path, body=body or None, headers=all_headers)
    response = conn.getresponse()
    response.read()
    return response


def _server_log(tmp_path: Path) -> str:
    """What this test's production server said, for a failure message."""
    log = tmp_path / "gunicorn.log"
    return log.read_text()[-4000:] if log.exists() else "(no server log)"


def test_production_server_headers_and_cookies(production_server, tmp_path):
    port = production_server
    plain = request(port, "GET", "/accounts/login/", https=False)
    assert plain.status == 301 and plain.getheader("Location") == f"https://{HOST}/accounts/login/"

    page = request(port, "GET", "/accounts/login/")
    assert page.status == 200, _server_log(tmp_path)
    assert page.getheader("Strict-Transport-Security") == (
        "max-age=31536000; includeSubDomains; preload")
    assert page.getheader("X-Content-Type-Options") == "nosniff"
    assert page.getheader("X-Frame-Options") == "DENY"
    csp = page.getheader("Content-Security-Policy")
    assert "script-src 'self'" in csp and "style-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    csrf_cookie = page.getheader("Set-Cookie")
    assert csrf_cookie.startswith("csrftoken=") and "Secure" in csrf_cookie

    csrf = re.search(r"csrftoken=([^;]+)", csrf_cookie).group(1)
    signed_in = request(
        port, "POST", "/accounts/login/",
        body=f"csrfmiddlewaretoken={csrf}&username=bench-op&password=a-long-bench-password",
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Cookie": f"csrftoken={csrf}", "Origin": f"https://{HOST}",
                 "Referer": f"https://{HOST}/accounts/login/"})
    assert signed_in.status == 302, signed_in.status
    session = next(c for c in signed_in.headers.get_all("Set-Cookie")
                   if c.startswith("sessionid="))
    assert "Secure" in session and "HttpOnly" in session
    # no lifetime of its own: the cookie goes when the browser closes; the server ends the
    # session after the idle time
    assert "Max-Age" not in session and "expires" not in session.lower()


def test_clients_that_stall_mid_request_do_not_stop_the_server(production_server, tmp_path):
    """Three connections that never finished their headers held all three workers of
    `make run` for 30 s, and a body shorter than its Content-Length ended in a 500 when
    gunicorn killed the worker. Here more stalled connections than the server has threads
    are given up, everyone else is answered, and the short body is the API's 400."""
    port = production_server
    stalled = []
    for _ in range(5):  # more than the test server's 2 threads
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\n".encode())
        stalled.append(s)
    short = socket.create_connection(("127.0.0.1", port))
    short.sendall((f"POST /api/v1/execution/actions/claim HTTP/1.1\r\nHost: {HOST}\r\n"
                   "X-Forwarded-Proto: https\r\nContent-Type: application/json\r\n"
                   'Content-Length: 60\r\n\r\n{"idempotency_key":').encode())
    time.sleep(0.5)
    assert request(port, "GET", "/metrics").status == 200, _server_log(tmp_path)
    short.settimeout(30)
    answer = b""
    while b'"field": "body"' not in answer and (chunk := short.recv(4096)):
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 400") and b'"code": "VALIDATION_ERROR"' in answer
    for s in stalled:  # closed by the server, unanswered
        s.settimeout(30)
        assert s.recv(100) == b""
        s.close()
    short.close()
