"""Results in a real browser, as QA reads them on a phone: the week's QC counted, a count
tapped to list the attempts it counts (a touch target), and back to every attempt; the days
are the reader's own from the first visit."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests import test_browser_ui as ui
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register

pytestmark = [pytest.mark.browser]

browser = ui.browser
site = ui.site
QC = [{"key": "rin", "label": "RIN", "min": 1, "max": 10, "required": True},
      {"key": "qc", "label": "QC", "kind": "pass_fail", "required": True}]


def _completed(name: str, result: dict) -> None:
    svc = actor(*SERVICE)
    make_subject("qcq", name=name)
    worker = register(svc, display_name="QC robot")
    lease = claim(svc, worker, "qcq")
    act("complete_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"result_snapshot": result})


def test_qa_taps_a_count_to_list_the_attempts_it_counts(browser, site):
    make_queue("qcq", display_name="Post-extraction QC", required_worker_capabilities=[],
               result_fields=QC)
    for name, rin, qc in (("Tube 1", 8.1, "pass"), ("Tube 2", 3.2, "fail"),
                          ("Tube 3", 7.7, "pass")):
        _completed(name, {"rin": rin, "qc": qc})
    page = ui.signed_in(browser, site, "qa", width=390, timezone_id="Europe/Berlin")
    page.get_by_role("link", name="Results").click()
    expect(page.locator("#results-count")).to_contain_text(
        "3 completed attempts from")
    expect(page.locator("#results-count")).to_contain_text("whole days in Europe/Berlin")
    expect(page.locator('#results-tally dd[data-field="rin"]')).to_have_text(
        "3 recorded, 3.2 to 8.1, median 7.7, mean 6.333")
    fail = page.get_by_role("link", name="1 fail")
    box = fail.bounding_box()
    assert box is not None and box["height"] >= 24, box
    fail.click()
    expect(page.locator("#results-found tbody tr")).to_have_count(1)
    expect(page.locator("#results-found tbody tr")).to_contain_text("Tube 2")
    expect(page.locator("#results-said")).to_contain_text("whose QC is fail")
    page.get_by_role("link", name="list every attempt").click()
    expect(page.locator("#results-found tbody tr")).to_have_count(3)
    page.context.close()
