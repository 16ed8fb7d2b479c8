"""The Content-Security-Policy holds on every screen in a real browser: no inline script or
style, no eval, nothing the policy refuses (Chromium reports each refusal on the console)."""

from __future__ import annotations

import pytest

from tests.engine import make_subject
from tests.test_browser_ui import PASSWORD, browser, signed_in, site  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]

SCREENS = ("/", "/queues/q1/", "/scan/", "/my-work/", "/subjects/{euid}/", "/workers/",
           "/workbench/", "/admin/", "/api/v1/docs")


def watch_csp(page) -> list[str]:
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text)
            if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: refused.append(str(e))
            if "Content Security Policy" in str(e) else None)
    return refused


def test_no_screen_breaks_the_content_security_policy(browser, site):  # noqa: F811
    euid = make_subject("q1", name="Specimen CSP")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    refused = watch_csp(page)
    page.goto(f"{site}/accounts/login/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").is_visible()
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{site}/")
    for path in SCREENS:
        page.goto(f"{site}{path.format(euid=euid)}")
        page.wait_for_load_state("load")
    # the API's interactive docs (Swagger UI) work under the policy too
    page.locator(".opblock").first.wait_for()
    # the dashboard's htmx refresh (1 s in these tests) and its pause run under the policy
    page.goto(f"{site}/")
    with page.expect_response(lambda r: r.url == f"{site}/"):
        pass
    page.get_by_role("button", name="Pause auto-refresh").click()
    assert refused == []
    context.close()


def test_the_locked_out_page_is_served_under_the_policy(browser, site):  # noqa: F811
    page = browser.new_context().new_page()
    refused = watch_csp(page)
    for _ in range(5):
        page.goto(f"{site}/accounts/login/")
        page.get_by_label("Username").fill("qa")
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("heading", name="Sign-in locked").is_visible()
    assert refused == []
    page.context.close()
