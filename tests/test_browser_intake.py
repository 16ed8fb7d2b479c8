"""The CSV manifest flow in a real browser (Chromium, strict CSP): upload, a preview with a
bad row, confirm, results per row and the result CSV download."""

from __future__ import annotations

import csv
import io
import re

import pytest

from tests.engine import SPECIMEN, counts, envelope
from tests.test_browser_ui import browser, signed_in, site  # noqa: F401 (fixtures)
from tests.test_intake import raw_sql_object

pytestmark = [pytest.mark.browser]


def test_operator_uploads_a_manifest_previews_confirms_and_downloads_results(
        browser, site):  # noqa: F811
    from_bloom = raw_sql_object(SPECIMEN, "Specimen from Bloom", {"site": "sfo"})
    manifest = ("euid,name,template,queue,priority,due_date,site,platform,assay\n"
                f"{from_bloom},,specimen,q1,STAT,2030-03-01,,,\n"
                ",Tube A,specimen,q1,URGENT,,sfo,ont,wgs\n"
                ",Tube B,specimen,no_such_queue,,,,,\n")
    page = signed_in(browser, site, "qa")
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text)
            if "Content Security Policy" in m.text else None)
    page.get_by_role("link", name="Intake").click()
    page.wait_for_url(f"{site}/intake/")
    page.get_by_label("Upload a CSV file").set_input_files(
        files=[{"name": "manifest.csv", "mimeType": "text/csv",
                "buffer": manifest.encode("utf-8-sig")}])
    # The page's script shows the chosen file's text before anything is sent.
    page.wait_for_function("document.getElementById('manifest-text').value.includes('Tube B')")
    before = counts()
    page.get_by_role("button", name="Preview").click()
    page.wait_for_url(f"{site}/intake/preview/")
    preview = page.locator("#intake-preview")
    assert preview.locator('tr[data-ok="yes"]').count() == 2
    bad = preview.locator('tr[data-ok="no"]')
    assert bad.count() == 1 and "no_such_queue" in bad.inner_text()
    assert counts() == before  # a preview writes nothing
    page.get_by_role("button", name="Confirm: run 2 rows").click()
    page.wait_for_url(re.compile(re.escape(site) + r"/intake/[0-9a-f]{32}/$"))
    results = page.locator("#intake-results")
    assert [results.locator(f'tr[data-line="{n}"]').get_attribute("data-outcome")
            for n in (2, 3, 4)] == ["ROUTED", "REGISTERED", "SKIPPED"]
    assert envelope(from_bloom)["state"] == "READY"
    with page.expect_download() as info:
        page.get_by_role("link", name="Download the result CSV").click()
    path = info.value.path()
    with open(path, encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read())))
    assert [r["outcome"] for r in rows] == ["ROUTED", "REGISTERED", "SKIPPED"]
    new_euid = rows[1]["subject_euid"]
    page.goto(f"{site}/queues/q1/")
    assert page.locator(f'#items tr[data-euid="{new_euid}"]').count() == 1
    assert page.locator(f'#items tr[data-euid="{from_bloom}"]').count() == 1
    assert violations == []
    page.context.close()


def test_a_human_worker_sees_no_intake_and_is_refused(browser, site):  # noqa: F811
    page = signed_in(browser, site, "scientist")
    assert page.get_by_role("link", name="Intake").count() == 0
    response = page.goto(f"{site}/intake/")
    assert response is not None and response.status == 403
    page.context.close()


def test_on_a_tablet_each_row_says_why_without_scrolling(browser, site):  # noqa: F811
    """At 768 px the check of each row sat past the table's edge: the preview said "2 with
    problems" and the person had to scroll sideways, row by row, to learn which and why."""
    manifest = ("euid,name,template,queue,priority,due_date,site,platform,assay\n"
                ",Tube with a rather long name for a tube,specimen,no_such_queue,,,sfo,ont,wgs\n"
                ",Tube C,specimen,q1,99999999999999999999999,,sfo,,\n")
    page = signed_in(browser, site, "qa", width=768)
    page.goto(f"{site}/intake/")
    page.get_by_label("or paste it").fill(manifest)
    page.get_by_role("button", name="Preview").click()
    page.wait_for_url(f"{site}/intake/preview/")
    for line, why in ((2, "no_such_queue"), (3, "priority must be within")):
        check = page.locator(f'#intake-preview tr[data-line="{line}"] td.check')
        assert why in check.inner_text()
        box = check.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 768, box
    assert page.evaluate("document.documentElement.scrollWidth") <= 768
    page.context.close()
