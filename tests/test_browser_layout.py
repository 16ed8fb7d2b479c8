"""The console on a bench tablet and a phone, measured in a real browser: every control on
the bench pages (scan, a queue, My work) is a touch target of at least 44x44 px at 768 and
390 px; no screen scrolls sideways at 768 px (the bench pages not at 390 either); and every
screen passes axe-core (from npm, package.json) with no serious or critical violation at
desktop (1366) and tablet (768) widths."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bloomops.execution import clock
from bloomops.execution.envelope import ts
from bloomops.web.templatetags.bloomops_ui import LISTED_TEXT
from tests import test_browser_ui as ui
from tests.approval_support import decide, integrity_held, person, request_release
from tests.engine import SPECIMEN, act, actor, make_subject
from tests.test_failures_view import held_and_dead

pytestmark = [pytest.mark.browser]

browser = ui.browser
site = ui.site

AXE = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
BENCH_PAGES = ("/scan/", "/queues/q1/", "/my-work/")
TOUCH = 44
# Every control a finger aims at: links, buttons, fields, disclosure triangles. Skip links
# are off-screen until focused; hidden inputs are not controls.
CONTROLS = ("a[href], button, select, textarea, summary,"
            " input:not([type=hidden]):not(.sr-only)")


def page_for(browser, site: str, username: str, width: int, *, axe: bool = False):
    # axe is injected as a script of the test's own, which the page's CSP (rightly) forbids.
    context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=axe)
    page = context.new_page()
    page.set_default_timeout(10000)
    page.goto(f"{site}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(ui.PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(site) + r"/(my-work/)?$"))  # the bench: My work
    return page


def small_targets(page, within: str = "") -> list[str]:
    """Visible controls smaller than 44x44 px (with every disclosure opened), in the element
    ``within`` selects (default: the page)."""
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    css = ", ".join(f"{within} {c.strip()}" for c in CONTROLS.split(",")) if within \
        else CONTROLS
    return page.evaluate(
        """([css, least]) => [...document.querySelectorAll(css)].filter(el => {
            const r = el.getBoundingClientRect();
            const style = getComputedStyle(el);
            if (style.visibility === 'hidden' || style.display === 'none') return false;
            if (r.width === 0 && r.height === 0) return false;  // not rendered
            if (el.classList.contains('skip')) return false;
            return r.width < least || r.height < least;
        }).map(el => {
            const r = el.getBoundingClientRect();
            const name = (el.getAttribute('aria-label') || el.textContent || el.name || '')
                .trim().slice(0, 30);
            const size = Math.round(r.width) + 'x' + Math.round(r.height);
            return `${el.tagName.toLowerCase()} "${name}" ${size}`;
        })""",
        [css, TOUCH],
    )


def overflow(page) -> int:
    return page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth")


@pytest.fixture
def bench(site):
    """A scientist holding one item (My work has its controls), more waiting in q1, one on
    hold; the subject page's EUID, and one with lineage (held)."""
    ready = make_subject("q1", name="Specimen waiting", priority=205,
                         due_at="2099-01-01T10:00:00.000000Z")
    make_subject("q1", name="Specimen also waiting")
    # a queue with a long name, listed on every screen that names queues (Results' list)
    # (through the queue actions, so its settings page offers every setting's form)
    act("create_queue", actor("admin", username="admin"),
        queue_key="post_extract_qc_second_pass", payload={
            "subject_template_codes": [SPECIMEN], "reason": "a second QC",
            "required_worker_capabilities": ["wetlab.qc"],
            "display_name": "Post-extraction quality control, second pass",
            "result_fields": [{"key": "rin", "label": "RNA integrity number", "unit": "RIN"}]})
    # one on hold, a failure and an approval waiting, so the workbench, the failures view
    # and the inbox have rows
    held_and_dead("q1", "q2")
    qa = person("qa-asker", "operator")
    gated, hold = integrity_held(qa)
    request_release(qa, gated, hold)
    # and one decided, signed by a second person with a long name
    decided, other = integrity_held(qa)
    decide(person("qa-decider", "operator", full_name="Maximiliana Featherstonehaugh"),
           request_release(qa, decided, other)["approval_euid"], "REJECTED",
           reason="the rerun trace is missing from the record")
    return {"site": site, "subject": ready, "held": gated}


def claim_one(page, site: str) -> None:
    page.goto(f"{site}/queues/q1/")
    page.get_by_role("button", name="Claim next").click()
    page.wait_for_url(lambda url: "/my-work/?item=" in url)


@pytest.mark.parametrize("width", [768, 390])
def test_every_bench_control_is_a_touch_target(browser, bench, width):
    site = bench["site"]
    page = page_for(browser, site, "scientist", width)
    claim_one(page, site)
    for path in BENCH_PAGES:
        page.goto(f"{site}{path}")
        assert small_targets(page) == [], (path, width)
        assert overflow(page) <= 0, (path, width, overflow(page))
    page.context.close()


@pytest.mark.parametrize("width", [768, 375])
def test_a_scientist_s_sign_in_and_dashboard_are_touch_targets(browser, bench, width):
    """A scientist signs in (landing on My work) and opens the dashboard, the list of
    queues: its inputs were 32 px tall, its queue links 36 px and its numbers 9x16 px."""
    from bloomops.execution.stats.recorder import record

    record()  # a sample: the dashboard draws its charts too
    site = bench["site"]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(f"{site}/accounts/login/")
    assert small_targets(page, ".signin") == []
    page.get_by_label("Username").fill("scientist")
    page.get_by_label("Password").fill(ui.PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{site}/my-work/")
    page.goto(f"{site}/")
    assert small_targets(page, "#queue-table") == [], width
    assert small_targets(page, "nav.ranges") == [], width  # 1h / 24h / 7d were 19x18 px
    # the charts' captions and the columns' key, the home link (18-22 px tall)
    for part in (".chart-pair figcaption", ".table-key", ".topbar"):
        assert small_targets(page, part) == [], (part, width)
    assert page.locator("figure.chart-pair").count() > 1  # the lab's and the queues'
    assert overflow(page) <= 0, (width, overflow(page))
    context.close()


def test_a_decided_approval_reads_whole_on_a_phone(browser, bench):
    """At 375 px the decisions' Signature column was squeezed to one letter a line and cut
    at the edge: who signed could not be read."""
    site = bench["site"]
    page = page_for(browser, site, "supervisor", 375)
    page.goto(f"{site}/approvals/")
    cells = page.locator("#approvals-recent td")
    assert cells.count() >= 5
    for i in range(cells.count()):
        box = cells.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    expect(page.locator("#approvals-recent")).to_contain_text("Maximiliana Featherstonehaugh")
    page.context.close()


def test_a_subjects_lineage_and_bundles_read_whole_on_a_phone(browser, bench):
    """At 375 px the subject page's lineage table scrolled inside itself: the objects an item
    is linked to, and when, sat past the edge."""
    site = bench["site"]
    page = page_for(browser, site, "supervisor", 375)
    page.goto(f"{site}/subjects/{bench['held']}/")
    cells = page.locator("section[aria-labelledby=h-lineage] td")
    assert cells.count() >= 5
    for i in range(cells.count()):
        box = cells.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    expect(cells.first).to_have_attribute("data-label", "Direction")  # said before it
    page.context.close()


@pytest.mark.parametrize("width", [768, 375])
def test_signing_an_approval_on_a_tablet_uses_touch_targets(browser, bench, width):
    """The reason, password and the two sign buttons were 30-33 px tall at 768 px; at
    375 px they sat past the edge of a table scrolled inside itself."""
    site = bench["site"]
    page = page_for(browser, site, "supervisor", width)
    page.goto(f"{site}/approvals/")
    assert page.locator("form.sign").count() >= 1
    assert small_targets(page, "form.sign") == []
    for name in ("Approve and sign", "Reject and sign"):
        box = page.get_by_role("button", name=name).first.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    page.context.close()


def screens(site: str, subject: str) -> list[str]:
    return ["/", "/queues/q1/", "/queues/q1/?state=HELD", "/scan/", "/my-work/",
            f"/subjects/{subject}/", "/workers/", "/workbench/", "/admin/", "/intake/",
            "/people/", "/people/scientist/", "/settings/queues/", "/settings/queues/q1/",
            "/settings/new-queue/", "/failures/", "/approvals/", "/holds/?since=all",
            "/completions/", "/activity/", "/results/",
            "/settings/queues/post_extract_qc_second_pass/"]


@pytest.mark.parametrize("width", [768, 375])
def test_no_screen_scrolls_sideways_on_a_tablet_or_a_phone(browser, bench, width):
    """At 375 px a person's page scrolled sideways: a fieldset is as wide as its widest
    field unless told otherwise."""
    site = bench["site"]
    page = page_for(browser, site, "admin", width)
    claim_one(page, site)
    wide = {}
    for path in screens(site, bench["subject"]):
        page.goto(f"{site}{path}")
        if overflow(page) > 0:
            wide[path] = overflow(page)
    assert wide == {}
    page.context.close()


@pytest.mark.parametrize("width", [1440, 1280])
def test_identifiers_in_tables_read_whole_on_a_desktop(browser, bench, width):
    """At 1440 px tables broke EUIDs, queue keys and codes mid-word ("Z-MX-" / "W2"), which a
    person then copies or reads back wrongly; a hash may still wrap, and nothing scrolls
    sideways for it, nor for a long name an admin typed (a token's, 100 characters)."""
    from bloomops.accounts.tokens import create_token

    create_token("scientist", by="admin", reason="the plate reader", name="plate-reader-" * 7)
    site = bench["site"]
    page = page_for(browser, site, "admin", width)
    claim_one(page, site)
    broken, wide = {}, {}
    for path in screens(site, bench["subject"]):
        page.goto(f"{site}{path}")
        split = page.evaluate("""() => Array.from(document.querySelectorAll(
            'main td code:not(.hash):not(.free)')).filter(c => c.getClientRects().length > 1)
            .map(c => c.textContent)""")
        if split:
            broken[path] = split
        if overflow(page) > 0:
            wide[path] = overflow(page)
    assert broken == {} and wide == {}
    page.context.close()


@pytest.mark.parametrize("width", [1280, 375])
def test_a_queue_s_settings_with_result_fields_read_whole(browser, bench, width):
    """The result fields' row of inputs squeezed the settings' help column to a letter a
    line (53 px at 1280, the page scrolling sideways): the rows' help now sits below them."""
    site = bench["site"]
    page = page_for(browser, site, "admin", width)
    page.goto(f"{site}/settings/queues/post_extract_qc_second_pass/")
    assert page.locator("#result-rows input[name=result-0-key]").input_value() == "rin"
    helps = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#settings-form > table > tbody > tr > td.muted')).map(
        e => Math.round(e.getBoundingClientRect().width))""")
    assert len(helps) > 5 and min(helps) >= (200 if width > 1000 else 120), helps
    assert overflow(page) <= 0
    page.context.close()


@pytest.mark.parametrize("width", [1440, 1280])
def test_an_admin_s_navigation_is_one_row_on_a_desktop(browser, site, width):
    """At 1440 px the admin's screens wrapped into a ragged second row beside the inspector's
    field and sign-out. The navigation has a row of its own, whole, below them."""
    page = page_for(browser, site, "admin", width)
    links = page.evaluate("""() => Array.from(document.querySelectorAll('.topbar nav a'))
        .map(e => Math.round(e.getBoundingClientRect().top))""")
    forms = page.evaluate("""() => Array.from(document.querySelectorAll(
        '.topbar form.lookup, .topbar form.signout')).map(
        e => Math.round(e.getBoundingClientRect().bottom))""")
    assert len(links) >= 10 and len(set(links)) == 1, links
    assert max(forms) <= links[0], (forms, links)
    # and Tab meets them in that order: the navigation after the forms in the page
    assert page.evaluate("""() => !!(document.querySelector('.topbar form.signout')
        .compareDocumentPosition(document.querySelector('.topbar nav'))
        & Node.DOCUMENT_POSITION_FOLLOWING)""")
    page.context.close()


@pytest.mark.parametrize("width", [1440, 1024])
def test_roles_and_usernames_in_tables_are_never_split(browser, site, width):
    """People read "worker_hu / man" in its Roles column, a queue's history "admi / n" and
    "create_que / ue": a long cell beside them took the width and split short words."""
    act("create_queue", actor("admin", username="admin"), queue_key="line",
        payload={"subject_template_codes": ["content/material/specimen/1.0"],
                 "display_name": "Line", "reason": "a reason long enough to take the width"
                 " of the table beside the short words of who did it and which action"})
    page = page_for(browser, site, "admin", width)
    split = {}
    for path in ("/people/", "/settings/queues/line/"):
        page.goto(site + path)
        words = page.evaluate("""() => Array.from(document.querySelectorAll(
            'main td .word, #history td code')).filter(e => e.textContent.length < 30)
            .map(e => [e.textContent, e.getClientRects().length])""")
        assert words, path
        split[path] = [w for w, lines in words if lines != 1]
    assert split == {"/people/": [], "/settings/queues/line/": []}
    page.context.close()


def axe_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now."""
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))
        """)


@pytest.mark.parametrize("width", [1366, 768, 375])
def test_every_screen_passes_axe(browser, bench, width):
    site = bench["site"]
    page = page_for(browser, site, "admin", width, axe=True)
    claim_one(page, site)
    found = {}
    for path in screens(site, bench["subject"]):
        page.goto(f"{site}{path}")
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        if violations := axe_violations(page):
            found[path] = violations
    page.context.close()
    signin = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
    login = signin.new_page()
    login.goto(f"{site}/accounts/login/")
    if violations := axe_violations(login):
        found["/accounts/login/"] = violations
    signin.close()
    assert found == {}


def test_a_page_saying_what_was_done_passes_axe(browser, bench):
    """The banner saying an outcome (a claim, a refusal) was a list whose role replaced the
    list's (axe: listitem, serious), on every page that said one; every screen's check ran
    on pages saying none."""
    site = bench["site"]
    page = page_for(browser, site, "admin", 1366, axe=True)
    claim_one(page, site)
    assert "Claimed" in page.locator(".messages").inner_text()
    assert axe_violations(page) == []
    page.context.close()


def controls_off_screen(page) -> list[str]:
    """Buttons and fields (actions, not links) that sit beyond the viewport's right edge,
    such as in a table that scrolls sideways inside itself."""
    return page.evaluate(
        """() => [...document.querySelectorAll(
                'main button, main select, main input:not([type=hidden]):not([type=checkbox])')]
            .filter(el => {
                const r = el.getBoundingClientRect();
                if (r.width === 0 && r.height === 0) return false;  // not rendered
                return r.right > document.documentElement.clientWidth + 1;
            }).map(el => (el.getAttribute('aria-label') || el.textContent || el.name || '')
                .trim().slice(0, 40))""")


@pytest.mark.parametrize("width", [768, 375])
def test_no_action_hides_beyond_the_right_edge_of_a_tablet(browser, bench, width):
    """Every screen's actions (claim, decide, drain ...) are on screen at 768 px without
    scrolling a table sideways; on a phone too, where the workbench's requeue, release and
    cancel, a worker's drain and a lease's force-expiry sat past the edge."""
    site = bench["site"]
    found = {}
    for user, paths in (("scientist", ["/queues/q1/", "/my-work/"]),
                        ("supervisor", ["/approvals/", "/failures/", "/workbench/"]),
                        ("admin", ["/workers/", "/admin/", f"/subjects/{bench['subject']}/"])):
        page = page_for(browser, site, user, width)
        if user == "scientist":
            claim_one(page, site)
        for path in paths:
            page.goto(f"{site}{path}")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            if hidden := controls_off_screen(page):
                found[path] = hidden
        page.context.close()
    assert found == {}


def test_a_supervisors_tables_show_every_column_on_a_tablet(browser, bench):
    """The dashboard's queue table and the failed attempts fit a 768 px tablet whole: no
    column (coverage, where a subject is now) is cut off behind a sideways scroll."""
    site = bench["site"]
    # STAT work waiting for days, as a busy lab's: the columns' badges and longest ages
    days_ago = ts(clock.now() - timedelta(days=3, hours=5, minutes=51))
    for key in ("q1", "q2"):
        make_subject(key, name="Specimen STAT", priority=300, ready_at=days_ago)
    page = page_for(browser, site, "supervisor", 768)
    wide = {}
    for path, table in (("/", "#queue-table"), ("/failures/?range=1h", "#failed-attempts")):
        page.goto(f"{site}{path}")
        assert page.locator(table).count() == 1, path
        over = page.evaluate("css => { const t = document.querySelector(css);"
                             " return t.scrollWidth - t.clientWidth; }", table)
        if over > 0:
            wide[path] = over
    page.context.close()
    assert wide == {}


def _sideways(page, css: str) -> dict:
    return page.evaluate("css => { const t = document.querySelector(css); return {"
                         " left: t.scrollLeft, more: t.getAttribute('data-more') }; }", css)


def test_a_table_wider_than_a_phone_says_so_and_keeps_its_scroll(browser, bench):
    """On a phone the dashboard's queue table scrolls inside itself: the page marks the edge
    more columns lie past, its caption stays in sight, and the table stays where the reader
    scrolled it through the auto-refresh (it jumped back to the first column every few
    seconds)."""
    site = bench["site"]
    page = page_for(browser, site, "supervisor", 375)
    table = "#queue-table"
    assert page.evaluate(f"document.querySelector('{table}').scrollWidth"
                         f" - document.querySelector('{table}').clientWidth") > 100
    expect(page.locator(table)).to_have_attribute("data-more", "right")
    # the table's caption ("As of ...") is read whole without scrolling
    assert page.evaluate(f"document.querySelector('{table} caption')"
                         ".getBoundingClientRect().right") <= 375
    page.evaluate(f"document.querySelector('{table}').scrollLeft = 80")
    expect(page.locator(table)).to_have_attribute("data-more", "left right")
    depth = '#queue-table tr[data-queue="q1"] td.depth'
    before = int(page.locator(depth).inner_text())
    make_subject("q1", name="Specimen arriving")  # the next refresh has something to change
    expect(page.locator(depth)).to_have_text(str(before + 1), timeout=10000)
    page.wait_for_timeout(300)  # the swap settled
    assert _sideways(page, table) == {"left": 80, "more": "left right"}
    page.evaluate(f"document.querySelector('{table}').scrollLeft = 100000")
    expect(page.locator(table)).to_have_attribute("data-more", "left")
    page.set_viewport_size({"width": 1366, "height": 900})
    expect(page.locator(table)).not_to_have_attribute("data-more", re.compile(".*"))
    page.context.close()


@pytest.mark.parametrize("width", [768, 375])
def test_every_console_control_is_a_touch_target_on_a_tablet(browser, bench, width):
    """The bench's controls were 44 px; an operator's Release, Cancel and Requeue on the
    subject page, a worker's Drain, the workbench's and failures' buttons were 30-35 px on
    the same tablet."""
    site = bench["site"]
    controls = ("button, select, summary, input:not([type=hidden]):not([type=checkbox])"
                ":not([type=radio]):not([type=file]):not(.sr-only)")
    found = {}
    for user, paths in (("supervisor", ["/workbench/", "/failures/", "/approvals/",
                                        f"/subjects/{bench['subject']}/"]),
                        ("admin", ["/workers/", "/admin/", "/settings/queues/q1/",
                                   "/people/"])):
        page = page_for(browser, site, user, width)
        for path in paths:
            page.goto(f"{site}{path}")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            small = page.evaluate("""([css, least]) => [...document.querySelectorAll(css)]
                .filter(el => { const r = el.getBoundingClientRect();
                                return r.width > 0 && (r.height < least || r.width < least); })
                .map(el => el.tagName.toLowerCase() + ' "' + (el.getAttribute('aria-label')
                     || el.textContent || el.name || '').trim().slice(0, 30) + '" '
                     + Math.round(el.getBoundingClientRect().width) + 'x'
                     + Math.round(el.getBoundingClientRect().height))""",
                [", ".join(f"main {c.strip()}" for c in controls.split(",")), TOUCH])
            if small:
                found[path] = small
        page.context.close()
    assert found == {}


def test_a_phones_cards_keep_their_select_all(browser, bench):
    """The cards hid the table's header, and with it the select-all box: every card was
    ticked by hand."""
    site = bench["site"]
    page = page_for(browser, site, "supervisor", 375)
    page.goto(f"{site}/workbench/")
    box = page.locator('#holds input[data-select-all="bulk-holds"]')
    expect(box).to_be_visible()
    box.check()
    picks = page.locator('#holds input.pick[form="bulk-holds"]')
    assert picks.count() >= 1
    assert all(picks.nth(i).is_checked() for i in range(picks.count()))
    page.context.close()


@pytest.mark.parametrize("width", [1366, 820])
def test_a_reason_of_one_unbroken_run_widens_no_screen(browser, site, width):
    """A 432-character reason with no space made the subject page, the workbench and the
    hold search about 4,000 px wide, on a desktop and a tablet alike."""
    from tests.engine import act, actor

    euid = make_subject("q1", name="Specimen with a long word")
    act("place_execution_hold", actor("operator", username="qa-long"), subject_euid=euid,
        expected_state="READY", payload={"hold_code": "SAMPLE_QUALITY", "reason": "x" * 432})
    page = page_for(browser, site, "admin", width)
    wide = {}
    for path in (f"/subjects/{euid}/", "/workbench/", "/holds/?since=all"):
        page.goto(f"{site}{path}")
        # whole, but on the workbench, which shows a reason's first characters
        assert "x" * (LISTED_TEXT - 1 if path == "/workbench/" else 432) in page.content()
        if overflow(page) > 0:
            wide[path] = overflow(page)
    assert wide == {}
    page.context.close()


def test_the_workbench_s_reasons_are_told_apart_by_a_screen_reader(browser, bench):
    """Seventeen fields were each named "Reason", eight disclosures "Cancel the work…":
    a screen reader's list of fields could not tell which item each was for."""
    site = bench["site"]
    page = page_for(browser, site, "admin", 1366)
    page.goto(f"{site}/workbench/")
    names = page.evaluate(
        """() => [...document.querySelectorAll('main input[name=reason], main summary')]
            .map(el => el.tagName === 'SUMMARY' ? el.textContent.trim()
                 : document.querySelector(`label[for="${el.id}"]`).textContent.trim())""")
    assert len(names) > 4 and len(names) == len(set(names)), names
    page.context.close()


def test_a_long_reason_leaves_codes_and_names_whole_in_the_hold_search(browser, site):
    """A 2,000-character reason of words squeezed the other columns of the hold search at
    1366 px: the placer read "Qui / nn / Ok / afo / r" and the code "LABEL_ISSU / E"."""
    from tests.engine import act, actor

    euid = make_subject("q1", name="Specimen with a long story")
    act("place_execution_hold", actor("operator", username="quinn-okafor-long-name"),
        subject_euid=euid, expected_state="READY",
        payload={"hold_code": "LABEL_ISSUE", "reason": "smudged label text " * 105})
    page = page_for(browser, site, "admin", 1366)
    page.goto(f"{site}/holds/?since=all")
    row = page.locator(f'#holds-found tr:has(a[href="/subjects/{euid}/"])')
    for label in ("Code", "By"):
        lines = row.locator(f'td[data-label="{label}"]').evaluate(
            """td => { const r = document.createRange(); r.selectNodeContents(td);
                       const tops = [...r.getClientRects()].map(b => Math.round(b.top));
                       return new Set(tops).size; }""")
        assert lines == 1, f"{label} broken over {lines} lines"
    page.context.close()


@pytest.mark.parametrize("width", [820, 768])
def test_a_queue_s_claim_buttons_and_row_numbers_read_whole_on_a_tablet(browser, bench, width):
    """A tablet's queue table read "Clai / m" on every button and "1 / 0" for row 10."""
    for n in range(10):
        make_subject("q1", name=f"Specimen with a long name to wrap, number {n}")
    site = bench["site"]
    page = page_for(browser, site, "scientist", width)
    page.goto(f"{site}/queues/q1/")
    broken = page.evaluate(
        """() => [...document.querySelectorAll('#items td.claim button, #items td.num')]
            .filter(el => { const range = document.createRange();
                            range.selectNodeContents(el);
                            return [...range.getClientRects()].map(r => Math.round(r.top))
                                .filter((t, i, all) => all.indexOf(t) === i).length > 1; })
            .map(el => el.textContent.trim())""")
    assert broken == [], width
    assert page.locator("#items thead th").filter(has_text="Claim").count() == 1
    page.context.close()


def test_the_workers_table_keeps_whole_words_on_a_desktop(browser, bench):
    """At 1366 px the Type column read "servic e" and "instru ment": the page's rule that a
    long typed word may break anywhere let the table squeeze that column."""
    from tests.engine import SERVICE, register

    svc = actor(*SERVICE)
    for n in range(3):
        register(svc, f"demo://compute/a-rather-long-dispatcher-key-{n}",
                 display_name=f"Demo pipeline dispatcher {n}",
                 capabilities=["compute.dispatch", "compute.qc", "wetlab.extraction"])
    site = bench["site"]
    page = page_for(browser, site, "supervisor", 1366)
    page.goto(f"{site}/workers/")
    # each Type cell's first word, and on how many lines it lies
    lines = page.evaluate("""() => [...document.querySelectorAll(
        '#workers tbody td:nth-child(2)')].map(td => {
            const r = document.createRange(); const t = td.firstChild;
                     if (!t || t.nodeType !== 3) return [td.textContent, 1];
                     const word = t.textContent.trim().split(' ')[0];
                     const at = t.textContent.indexOf(word);
                     r.setStart(t, at); r.setEnd(t, at + word.length);
                     const tops = [...r.getClientRects()].map(x => Math.round(x.top));
                     return [word, new Set(tops).size]; })""")
    assert lines and all(n == 1 for _, n in lines), lines
    page.context.close()


def test_a_supervisor_on_a_tablet_sees_each_workers_heartbeat(browser, bench):
    """At 820 px the workers table dropped its Last heartbeat column with the optional ones:
    whether a worker is alive, the page's point, was not on it. It goes with the status (a
    column of its own pushed an admin's controls past the edge at 768 px)."""
    site = bench["site"]
    for width, shown in ((820, True), (1366, False)):
        page = page_for(browser, site, "supervisor", width)
        page.goto(f"{site}/workers/")
        said = page.locator("#workers tbody tr").first.locator("td").nth(2).locator(
            ".heartbeat")
        (expect(said).to_be_visible() if shown else expect(said).to_be_hidden())
        if shown:
            expect(said).to_contain_text("lag")
        page.context.close()


def test_a_reasoned_forms_label_sits_over_its_field_on_a_tablet(browser, bench):
    """At 820 px "Hold reason", "Why release" and "Why cancel" ended one line and their fields
    began the next, beside the following form's words."""
    site = bench["site"]
    page = page_for(browser, site, "qa", 820)
    page.goto(f"{site}/subjects/{bench['subject']}/")
    apart = page.evaluate("""() => [...document.querySelectorAll('form.reasoned > label[for]')]
        .filter(l => l.offsetParent).map(l => {
          const f = document.getElementById(l.htmlFor); if (!f || !f.offsetParent) return null;
          const a = l.getBoundingClientRect(), b = f.getBoundingClientRect();
          return (b.top >= a.bottom - 2 && Math.abs(b.left - a.left) < 4) ? null
                 : l.textContent.trim(); }).filter(Boolean)""")
    assert apart == []
    page.context.close()


def test_the_workbench_holds_keep_whole_words_on_a_tablet(browser, bench):
    """At 820 px the holds table squeezed its columns until "svc-extractor" broke mid-word;
    names kept whole, it then ran past the screen and broke Release and Cancel into
    letters."""
    from tests.engine import act, make_subject

    for n in range(4):
        act("place_execution_hold", actor("operator", username="svc-extractor"),
            subject_euid=make_subject("q1", name=f"Specimen held number {n}"),
            expected_state="READY", payload={
                "reason": "reagent lot recalled by the supplier this morning " + "x" * 60})
    site = bench["site"]
    page = page_for(browser, site, "qa", 820)
    page.goto(f"{site}/workbench/")
    width = page.evaluate("() => document.documentElement.clientWidth")
    for summary in page.locator("#holds td.actions summary").all():
        box = summary.bounding_box()
        assert box and box["x"] + box["width"] <= width, box
    broken = page.evaluate("""() => [...document.querySelectorAll('#holds td:not(.why)')]
      .flatMap(td => {
        const out = []; const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
        for (let t = walk.nextNode(); t; t = walk.nextNode()) {
          for (const m of t.textContent.matchAll(/[A-Za-z]{6,}/g)) {  // a hyphen may break
            const r = document.createRange(); r.setStart(t, m.index);
            r.setEnd(t, m.index + m[0].length);
            if (new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1)
              out.push(m[0]); } }
        return out; })""")
    assert broken == []
    page.context.close()


def test_the_qa_desk_and_an_admins_links_are_touch_targets_on_a_tablet(browser, bench):
    """A walk at 800 px: the workbench's subject links 66x16 px, the approvals' subject
    49x36, a queue's settings' links 18-22 px and its checkboxes 24 px, the intake
    preview's way out 18 px; a chart's figures and the columns' key lost their triangle."""
    from bloomops.execution.stats.recorder import record

    record()
    site = bench["site"]
    page = page_for(browser, site, "qa", 800)
    for path, parts in (("/workbench/", ("#holds", "#dead-letters")),
                        ("/approvals/", ("#approvals-waiting",))):
        page.goto(f"{site}{path}")
        for part in parts:
            assert small_targets(page, part) == [], (path, part)
    # a word of the approvals' reasons reads whole ("Releasin g", "contami nation")
    assert page.evaluate("""() => [...document.querySelectorAll('#approvals-waiting td')]
        .every(td => getComputedStyle(td).overflowWrap === 'break-word')""")
    page.goto(f"{site}/")
    assert page.evaluate("""() => [...document.querySelectorAll(
        '.chart-figures summary, .table-key summary')].every(
        s => getComputedStyle(s).display === 'list-item')""")
    assert small_targets(page, ".chart-figures") == []  # (a chart's plot is one target)
    page.context.close()
    page = page_for(browser, site, "admin", 800)
    page.goto(f"{site}/settings/queues/")
    page.locator("main a[href^='/settings/queues/']").first.click()
    assert small_targets(page, ".pagehead") == []
    assert small_targets(page, "#settings-form") == []
    page.goto(f"{site}/intake/")
    page.get_by_label("or paste it").fill(
        "name,template,queue\nTablet tube,specimen,q1\n")
    page.get_by_role("button", name="Preview", exact=True).click()
    assert small_targets(page, "form:has(#intake-edit)") == []
    page.context.close()


@pytest.mark.parametrize("width", [820, 768])
def test_activity_keeps_euids_people_and_states_whole_on_a_tablet(browser, bench, width):
    """At 820 px Activity read "Z-MX-" over "5H", "worker_s" over "ervice" and "FAILED_T" over
    "ERMINAL": an auditor's reference split in two. A queue's key and a reason may wrap."""
    site = bench["site"]
    page = page_for(browser, site, "qa", width)
    page.goto(f"{site}/activity/")
    broken = page.evaluate("""() => [...document.querySelectorAll('#activity-found td')]
      .filter(td => !['Queue', 'Why'].includes(td.dataset.label)).flatMap(td => {
        const out = []; const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
        for (let t = walk.nextNode(); t; t = walk.nextNode()) {
          // a reference whole; in the What's prose ("asked by qa-asker") a hyphen may break
          const run = td.dataset.label === 'What' ? /[A-Za-z0-9_]+/g
            : /[A-Za-z0-9_]+(-[A-Za-z0-9_]+)*/g;
          for (const m of t.textContent.matchAll(run)) {
            const r = document.createRange(); r.setStart(t, m.index);
            r.setEnd(t, m.index + m[0].length);
            if (new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1)
              out.push(td.dataset.label + ': ' + m[0]); } }
        return out; })""")
    assert page.locator("#activity-found tbody tr").count() >= 5 and broken == []
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.context.close()
