"""Download evidence in a real browser, then verify the downloaded file with the command an
auditor runs (docs/RULES.md#evidence)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from tests.engine import make_subject
from tests.test_browser_ui import browser, signed_in, site  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser]


def test_qa_downloads_evidence_and_the_file_verifies(browser, site, tmp_path, capsys):  # noqa: F811
    euid = make_subject("q1", name="Specimen for the auditor")
    page = signed_in(browser, site, "qa")
    page.goto(f"{site}/subjects/{euid}/")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download evidence").click()
    download = info.value
    assert download.suggested_filename.startswith(f"evidence-{euid}-")
    # the page lists the bundle just recorded, without a reload (it said "No evidence
    # bundle recorded yet." until one)
    expect(page.locator("#bundles-recorded #bundles tbody tr")).to_have_count(1)
    expect(page.locator("#bundles-recorded")).to_contain_text("qa")
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    call_command("verify_evidence", str(path))
    out = capsys.readouterr().out
    assert "VERIFIED" in out and "by qa at" in out
    page.context.close()


def test_a_scientist_sees_no_download_control(browser, site):  # noqa: F811
    euid = make_subject("q1", name="Specimen")
    page = signed_in(browser, site, "scientist")
    page.goto(f"{site}/subjects/{euid}/")
    assert page.get_by_role("button", name="Download evidence").count() == 0
    page.context.close()
