"""My work as a person at the bench reads it: what the item is (priority, due, step), where
it may go next (only where the flow allows), failure kinds in plain words and only those
the person may use, and what happened to a claim that ended without them (timed out,
force-expired by whom and why, their worker paused or disabled)."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from bloomops.execution import clock, selectors
from bloomops.web import services
from tests.engine import act, actor, counts, envelope, make_queue, make_subject
from tests.web_support import form_for, forms, signed_in

pytestmark = pytest.mark.django_db


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def claim(client, euid: str) -> str:
    """Claim through the scan form; the lease's EUID."""
    client.post("/scan/", form_for(client.get("/scan/"), "/scan/", euid=euid))
    return next(x["euid"] for x in selectors.leases(status="ACTIVE")
                if x["subject_euid"] == euid)


def options(html: str, select_name: str) -> list[str]:
    block = re.search(rf'<select[^>]*name="{select_name}"[^>]*>(.*?)</select>', html, re.S)
    assert block, select_name
    return re.findall(r'<option value="([^"]*)"', block.group(1))


def test_my_work_says_priority_due_and_step_in_words(client, lab):
    euid = make_subject("q1", name="Specimen urgent", priority=205,
                        due_at="2099-01-01T10:00:00.000000Z",
                        next_action_key="wetlab.extract_dna")
    sci = signed_in(client, lab["worker_human"])
    claim(sci, euid)
    html = sci.get("/my-work/").content.decode()
    assert "URGENT</span>" in html and '<span class="prio-number">205</span>' in html
    assert "Wetlab: extract dna" in html
    assert '<time datetime="2099-01-01T10:00:00Z" title="2099-01-01 10:00:00 UTC"' in html
    assert "Queue one" in html  # the queue's name, not only its key
    assert "2099-01-01T10:00:00.000000Z" not in html  # never the raw envelope text
    assert "overdue" not in html


def test_my_work_puts_what_runs_out_first_then_stat_work_on_top(client, lab):
    """Cards were in the order they were claimed: a STAT item claimed last, with minutes
    left, sat below the fold under the morning's ROUTINE work."""
    make_queue("long", lease_ttl_seconds=3600)
    first = make_subject("long", name="Routine tube")
    stat = make_subject("long", name="Stat tube", priority=300)
    short = make_subject("q1", name="Short claim")
    sci = signed_in(client, lab["worker_human"])
    for euid in (short, first, stat):
        claim(sci, euid)

    def order() -> list[str]:
        html = sci.get("/my-work/").content.decode()
        return re.findall(r'<article class="work-item[^"]*" data-euid="([^"]+)"', html)

    assert order() == [stat, short, first]
    clock.advance(14 * 60)  # q1's 15-minute claim is in its last minutes
    assert order() == [short, stat, first]


def test_my_work_marks_an_item_past_its_due_date(client, lab):
    euid = make_subject("q1", name="Specimen late", due_at="2020-01-01T10:00:00.000000Z")
    sci = signed_in(client, lab["worker_human"])
    claim(sci, euid)
    due = re.search(r'<dd class="due">(.*?)</dd>', sci.get("/my-work/").content.decode(), re.S)
    assert '<span class="badge bad">overdue</span>' in due.group(1)


def test_claim_next_opens_the_claimed_items_work_view(client, lab):
    first = make_subject("q1", name="First in line", ready_at="2020-01-01T00:00:00.000000Z")
    other = make_subject("q1", name="Second")
    sci = signed_in(client, lab["worker_human"])
    claim(sci, other)
    response = sci.post("/queues/q1/claim-next/",
                        form_for(sci.get("/queues/q1/"), "/queues/q1/claim-next/"))
    page = sci.get(response["Location"])
    html = page.content.decode()
    assert "<h1>Work on First in line</h1>" in html
    assert f'data-euid="{first}"' in html and f'data-euid="{other}"' not in html
    assert "All my work (1 more)" in html


def test_next_queue_offers_only_what_the_flow_allows(client, lab):
    make_queue("ont", display_name="ONT prep")
    make_queue("lim", display_name="Limited", default_next_queue_key="q2",
               next_queue_keys=["q1"])
    euids = [make_subject("q1"), make_subject("lim"), make_subject("q2")]
    sci = signed_in(client, lab["worker_human"])
    leases = [claim(sci, e) for e in euids]
    page = sci.get("/my-work/")
    html = page.content.decode()
    chosen = {lease: options(html[html.index(f'id="next-{lease}"') - 60:], "next_queue_key")
              for lease in leases}
    assert chosen[leases[0]] == ["q2"]  # the default next queue; the flow goes on
    assert chosen[leases[1]] == ["q2", "q1"]  # default first, then the allowed others
    assert chosen[leases[2]] == [""]  # end of the flow: only finishing
    assert form_for(page, f"/leases/{leases[0]}/complete/")["next_queue_key"] == "q2"
    queue_page = sci.get("/queues/lim/").content.decode()
    assert 'also allowed: <a href="/queues/q1/">q1</a>' in queue_page


def test_a_disabled_next_queue_is_offered_as_disabled(client, lab):
    """Complete offered "Staining" with no word that it was disabled: the item went there and
    waited, unclaimed, and nobody at the bench knew why."""
    make_queue("stain", display_name="Staining", enabled=False)
    make_queue("section", default_next_queue_key="stain")
    euid = make_subject("section")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    html = sci.get("/my-work/").content.decode()
    form = html[html.index(f'id="next-{lease}"'):]
    assert ('<option value="stain" selected>Staining (stain): disabled, it waits there'
            ' until enabled</option>') in form[:form.index("</select>")]
    assert "→ Staining (stain), disabled</span>" in form

def test_a_next_queue_offering_no_ready_items_is_not_offered(client, lab):
    """Complete offered a queue that takes retries alone; the engine refused the item there
    (it would wait unseen), and the person chose again."""
    make_queue("retries", display_name="Retries only", eligible_states=["FAILED_RETRYABLE"])
    make_queue("fork", next_queue_keys=["retries", "q2"])
    euid = make_subject("fork")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    html = sci.get("/my-work/").content.decode()
    assert options(html[html.index(f'id="next-{lease}"') - 60:], "next_queue_key") == [
        "-choose", "", "q2"]

def test_a_next_queue_that_does_not_exist_is_said_as_such(client, lab):
    """With the flow's next queue misspelt, every card said it "does not take this item
    (its kind, site, platform or assay)": the real cause was that no such queue exists."""
    make_queue("prep", default_next_queue_key="nope_queue")
    euid = make_subject("prep")
    sci = signed_in(client, lab["worker_human"])
    claim(sci, euid)
    html = sci.get("/my-work/").content.decode()
    assert "The flow's next queue, nope_queue, does not exist" in html
    assert "does not take this item" not in html


def test_next_queue_offers_only_queues_that_take_the_item(client, lab):
    """A sample whose flow's next queue takes only libraries is offered to finish there,
    not to move into a queue where it could never be seen; forcing the move is refused in
    words and writes nothing."""
    make_queue("pool", display_name="Pooling",
               subject_template_codes=["content/material/library/1.0"])
    make_queue("prep", default_next_queue_key="pool", next_queue_keys=["q2"])
    euid = make_subject("prep")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    page = sci.get("/my-work/")
    html = page.content.decode()
    # Somewhere to go but no default: the person chooses (finishing is a choice too, never
    # what a tap does unasked).
    assert options(html[html.index(f'id="next-{lease}"') - 60:], "next_queue_key") == [
        "-choose", "", "q2"]
    assert form_for(page, f"/leases/{lease}/complete/")["next_queue_key"] == "-choose"
    assert "The flow's next queue, Pooling, does not take this item" in html
    before = counts()
    unchosen = sci.post(f"/leases/{lease}/complete/", form_for(page, f"/leases/{lease}/complete/"))
    assert said(unchosen)[-1].startswith("Choose where the item goes next")
    assert counts() == before
    # said at the list too, which is marked for it (the focus starts there, bloomops.js)
    card = sci.get(unchosen["Location"]).content.decode()
    select = card[card.index(f'<select id="next-{lease}"'):].split(">")[0]
    assert 'aria-invalid="true"' in select and f'aria-describedby="next-{lease}-problem"' in select
    assert f'id="next-{lease}-problem">Choose where the item goes next' in card
    data = form_for(page, f"/leases/{lease}/complete/", next_queue_key="pool")
    before = counts()
    response = sci.post(f"/leases/{lease}/complete/", data)
    assert said(response)[-1:] == ["Queue 'pool' does not take content/material/specimen/1.0"
                              " subjects (it takes: content/material/library/1.0)."]
    assert counts() == before and envelope(euid)["next_queue_key"] == "prep"


def test_next_queue_offers_only_queues_that_have_the_item_in_scope(client, lab):
    """A queue serving another platform would never show the item (the engine refuses the
    move, SUBJECT_OUT_OF_SCOPE): it is not offered."""
    make_queue("ont", display_name="ONT prep", platform_scope=["ont"])
    make_queue("ilmn", display_name="Illumina prep", platform_scope=["illumina"])
    make_queue("qc", default_next_queue_key="ont", next_queue_keys=["ilmn"])
    euid = make_subject("qc")  # platform illumina
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    html = sci.get("/my-work/").content.decode()
    assert options(html[html.index(f'id="next-{lease}"') - 60:], "next_queue_key") == [
        "-choose", "", "ilmn"]


def test_a_flow_whose_default_cannot_take_the_item_offers_every_queue_that_can(client, lab):
    """An ONT extract after a QC whose default is the Illumina line, the QC listing no next
    queues (any may follow): the bench offered only "finish the flow", its default."""
    make_queue("ilmn", display_name="Illumina prep", platform_scope=["illumina"])
    make_queue("ont", display_name="ONT prep", platform_scope=["ont"])
    make_queue("ont_old", platform_scope=["ont"], enabled=False)  # not offered: disabled
    make_queue("qc", default_next_queue_key="ilmn")
    euid = make_subject("qc", props={"platform": "ont"})
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    page = sci.get("/my-work/")
    html = page.content.decode()
    offered = options(html[html.index(f'id="next-{lease}"') - 60:], "next_queue_key")
    assert offered[:2] == ["-choose", ""] and "ont" in offered
    assert "ilmn" not in offered and "ont_old" not in offered
    response = sci.post(f"/leases/{lease}/complete/",
                        form_for(page, f"/leases/{lease}/complete/", next_queue_key="ont"))
    assert said(response)[-1] == (f'Completed <a href="/subjects/{euid}/">s ({euid})</a>;'
                                  " it moved to ONT prep (ont).")  # its name
    assert envelope(euid)["next_queue_key"] == "ont"


def test_completing_a_step_makes_its_output_for_the_next_queue(client, lab):
    """Library prep at the bench: the flow's next queue takes libraries, not the sample, so
    the default completion makes a library of the sample (carrying its site, platform and
    assay, its priority and due date) and routes it there for the pool step; the sample is
    finished. Was: only "finish the flow", and nothing reached the next queue."""
    library = "content/material/library/1.0"
    make_queue("pool", display_name="Pooling", subject_template_codes=[library],
               default_next_action_key="wetlab.pool", site_scope=["sfo"])
    make_queue("prep", display_name="Library prep", default_next_queue_key="pool",
               output_template_codes=[library])
    euid = make_subject("prep", name="Sample 7", priority=205,
                        due_at="2099-01-01T10:00:00.000000Z")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    page = sci.get("/my-work/")
    html = page.content.decode()
    make = f"make|pool|{library}"
    assert options(html[html.index(f'id="next-{lease}"') - 60:], "next_queue_key") == [make, ""]
    assert form_for(page, f"/leases/{lease}/complete/")["next_queue_key"] == make
    assert "Pooling (pool): make a new library" in html
    assert "passed-over" not in html  # the flow's next queue is offered, not passed over
    assert selectors.queue_depths()["pool"] == 0
    response = sci.post(f"/leases/{lease}/complete/",
                        form_for(page, f"/leases/{lease}/complete/"))
    [words] = said(response)
    # what was made linked by its name: what the person writes on the new tube
    made = re.search(r'made <a href="/subjects/(Z-[^/]+)/">Library of Sample 7 \(\1\)</a>'
                     r" \(library\) for Pooling \(pool\)", words).group(1)
    assert envelope(euid)["state"] == "COMPLETED"
    output = selectors.subject_diagnostics(made)
    assert output.name == "Library of Sample 7" and output.template_code == library
    assert {k: output.props[k] for k in ("site", "platform", "assay", "derived_from_euid")} == {
        "site": "sfo", "platform": "illumina", "assay": "wgs", "derived_from_euid": euid}
    assert (output.state, output.queue_key, output.visible) == ("READY", "pool", True)
    assert output.execution["next_action_key"] == "wetlab.pool"
    assert output.execution["priority"] == 205
    assert output.execution["due_at"] == "2099-01-01T10:00:00.000000Z"
    assert selectors.queue_depths()["pool"] == 1


def test_subjects_named_in_one_banner_are_read_in_one_query(lab, django_assert_num_queries):
    """What a step made was named one query per output: a banner of several outputs read
    each name alone."""
    made = [make_subject("q1", name=f"Aliquot {n}") for n in range(3)]
    unnamed = make_subject("q1", name="")
    with django_assert_num_queries(1):
        links = str(services.subject_links([*made, unnamed]))
    assert links == ", ".join([*(f'<a href="/subjects/{e}/">Aliquot {n} ({e})</a>'
                                 for n, e in enumerate(made)),
                               f'<a href="/subjects/{unnamed}/">{unnamed}</a>'])


def test_a_forged_make_choice_is_refused_and_writes_nothing(client, lab):
    """The choice names the queue and template; the engine still decides: a template the
    step's queue does not declare, or a claim that is not the person's, makes nothing."""
    library = "content/material/library/1.0"
    make_queue("pool", subject_template_codes=[library])
    make_queue("prep", default_next_queue_key="pool", output_template_codes=[library])
    euid = make_subject("prep")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    page = sci.get("/my-work/")
    before = counts()
    forged = form_for(page, f"/leases/{lease}/complete/",
                      next_queue_key="make|pool|content/material/pool/1.0")
    response = sci.post(f"/leases/{lease}/complete/", forged)
    assert "declares no content/material/pool/1.0 outputs" in said(response)[0]
    other = form_for(page, f"/leases/{lease}/complete/", next_queue_key=f"make|pool|{library}")
    response = sci.post("/leases/Z-XX-NOTMINE/complete/", other)
    assert said(response)[-1] == "This claim is not yours."
    unknown = form_for(page, f"/leases/{lease}/complete/",
                       next_queue_key="make|pool|no/such/template/1.0")
    response = sci.post(f"/leases/{lease}/complete/", unknown)  # was a 500 (LookupError)
    assert said(response)[-1] == "No template 'no/such/template/1.0' to make."
    assert counts() == before
    # the same choice from an older tab, once the claim was completed: how and when
    sci.post(f"/leases/{lease}/complete/", other)
    again = form_for(page, f"/leases/{lease}/complete/", next_queue_key=f"make|pool|{library}")
    response = sci.post(f"/leases/{lease}/complete/", again)
    assert said(response)[-1].startswith("This item is no longer yours: it was already"
                                         " completed (")
    assert envelope(euid)["state"] == "COMPLETED"


@pytest.mark.parametrize(("first", "fields", "words"), [
    ("complete", {}, "it was already completed"),
    ("release", {}, "it was already released back to its queue"),
    ("fail", {"error_class": "TRANSIENT_DEPENDENCY", "error_message": "busy"},
     "a failure was already recorded for it"),
])
def test_an_older_tab_is_told_what_already_ended_the_claim(client, lab, first, fields, words):
    """A second tab acting on a claim the person already ended was told "My work says why",
    and My work said nothing (one's own endings are not news there)."""
    euid = make_subject("q1")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    old_page = sci.get("/my-work/")
    sci.post(f"/leases/{lease}/{first}/",
             form_for(old_page, f"/leases/{lease}/{first}/", **fields))
    before = counts()
    response = sci.post(f"/leases/{lease}/renew/", form_for(old_page, f"/leases/{lease}/renew/"))
    said_now = said(response)[-1]
    assert said_now.startswith(f"This item is no longer yours: {words} (")
    assert said_now.endswith("). Nothing more was done.") and "My work says why" not in said_now
    assert counts() == before


def test_completing_outside_the_flow_is_refused_in_words_and_writes_nothing(client, lab):
    make_queue("ont", display_name="ONT prep")
    make_queue("lim", default_next_queue_key="q2", next_queue_keys=[])
    euid = make_subject("lim")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    data = form_for(sci.get("/my-work/"), f"/leases/{lease}/complete/", next_queue_key="ont")
    before = counts()
    response = sci.post(f"/leases/{lease}/complete/", data)
    assert said(response) == ["This queue's flow moves items to q2, not to ont."]
    assert counts() == before and envelope(euid)["next_queue_key"] == "lim"


@pytest.mark.parametrize(("role", "may_cancel"), [("worker_human", False), ("admin", True)])
def test_failure_kinds_are_words_and_cancel_is_not_a_bench_choice(client, lab, role,
                                                                  may_cancel):
    euid = make_subject("q1")
    person = signed_in(client, lab[role])
    lease = claim(person, euid)
    html = person.get("/my-work/").content.decode()
    kinds = options(html, "error_class")
    assert ("OPERATOR_CANCELED" in kinds) is may_cancel
    assert "TRANSIENT_SYSTEM" in kinds and ">TRANSIENT_SYSTEM<" not in html
    assert "Try again later: an instrument or computer hiccup" in html
    assert f"/leases/{lease}/fail/" in html


def test_a_failure_asks_its_kind_and_takes_none_by_default(client, lab):
    """The kind started at "Try again later": a hurried Yes sent a cracked tube back to be
    tried again. None is chosen until the person chooses, and one sent without is refused."""
    euid = make_subject("q1")
    person = signed_in(client, lab["worker_human"])
    lease = claim(person, euid)
    page = person.get("/my-work/")
    html = page.content.decode()
    assert options(html, "error_class")[0] == ""
    select = re.search(r'<select[^>]*name="error_class"[^>]*>', html).group(0)
    assert "required" in select
    before = counts()
    response = person.post(f"/leases/{lease}/fail/", form_for(
        page, f"/leases/{lease}/fail/", error_class="", error_message="tube cracked"))
    assert said(response)[0] == ("Choose what kind of failure it was: whether the item is"
                                 " tried again depends on it.")
    assert counts() == before and envelope(euid)["state"] == "READY"


def test_a_person_forging_a_cancel_through_fail_gets_403_and_nothing_is_written(client, lab):
    euid = make_subject("q1")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    data = form_for(sci.get("/my-work/"), f"/leases/{lease}/fail/",
                    error_class="OPERATOR_CANCELED", error_message="done with it")
    before = counts()
    response = sci.post(f"/leases/{lease}/fail/", data)
    assert response.status_code == 403
    assert counts() == before and envelope(euid)["state"] == "READY"


def test_a_failure_pasted_longer_than_it_may_be_is_refused_in_words_not_cut(client, lab):
    """The field cut a pasted log at 4,000 characters without a word, and the cut text was
    recorded as what went wrong."""
    euid = make_subject("q1")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    page = sci.get("/my-work/").content.decode()
    field = page.split('id="msg-')[1].split(">")[0]
    assert "maxlength" not in field
    data = form_for(sci.get("/my-work/"), f"/leases/{lease}/fail/",
                    error_class="TRANSIENT_DEPENDENCY", error_message="timeout " * 600)
    before = counts()
    response = sci.post(f"/leases/{lease}/fail/", data)
    assert counts() == before and envelope(euid)["state"] == "READY"
    assert "What went wrong is too long: at most 4000 characters." in said(response)


def test_a_force_expired_claim_is_explained_with_who_and_why(client, lab):
    euid = make_subject("q1", name="Specimen stuck")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    act("expire_queue_lease", actor("admin", username="adm"), lease_euid=lease,
        payload={"reason": "bench closed"})
    html = sci.get(f"/my-work/?item={lease}").content.decode()
    notice = html[html.index('id="lost-leases"'):]
    assert "This item is no longer yours" in notice
    assert "Specimen stuck" in notice
    assert "adm ended your claim; the item went back to its queue" in notice
    assert "“bench closed”" in notice
    assert 'id="my-leases"' not in html


def test_a_claim_that_ran_out_is_explained_even_before_the_sweeper(client, lab):
    euid = make_subject("q1", name="Specimen slow")
    sci = signed_in(client, lab["worker_human"])
    claim(sci, euid)
    clock.advance(3600)
    html = sci.get("/my-work/").content.decode()
    assert "Your claim ran out before it was renewed" in html
    assert 'id="no-leases"' in html


def test_my_own_release_and_completion_are_not_reported_as_lost(client, lab):
    sci = signed_in(client, lab["worker_human"])
    released, done = make_subject("q1"), make_subject("q1")
    for euid, action in ((released, "release"), (done, "complete")):
        lease = claim(sci, euid)
        sci.post(f"/leases/{lease}/{action}/",
                 form_for(sci.get("/my-work/"), f"/leases/{lease}/{action}/"))
    assert 'id="lost-leases"' not in sci.get("/my-work/").content.decode()


@pytest.mark.parametrize(("operation", "words"), [
    ("drain", "An admin has paused new work for you"),
    ("disable", "An admin has stopped your work here"),
])
def test_a_paused_or_disabled_worker_is_told_by_whom_and_why(client, lab, operation, words):
    worker = services.ensure_my_worker(lab["worker_human"])
    act("set_worker_status", actor("admin", username="adm"), worker_euid=worker,
        payload={"operation": operation, "reason": "end of shift"})
    html = signed_in(client, lab["worker_human"]).get("/my-work/").content.decode()
    standing = html[html.index('id="worker-standing"'):]
    assert words in standing and "by adm" in standing and "“end of shift”" in standing
    assert "draining" not in standing.lower()


def test_release_asks_why_and_keeps_it(client, lab):
    euid = make_subject("q1")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    page = sci.get("/my-work/")
    assert any(f["action"] == f"/leases/{lease}/release/" and "reason" in f["fields"]
               for f in forms(page.content.decode()))
    sci.post(f"/leases/{lease}/release/", form_for(page, f"/leases/{lease}/release/",
                                                   reason="wrong rack"))
    assert next(x for x in selectors.leases() if x["euid"] == lease)["props"][
        "release_reason"] == "wrong rack"


def test_a_scan_refused_because_someone_has_it_names_them_and_a_humane_time(client, lab):
    euid = make_subject("q1", name="Specimen taken")
    other = signed_in(client, lab["admin"])
    lease = claim(other, euid)
    client.logout()
    sci = signed_in(client, lab["worker_human"])
    response = sci.post("/scan/", form_for(sci.get("/scan/"), "/scan/", euid=euid))
    html = response.content.decode()
    reason = re.search(r'<li data-code="ACTIVE_LEASE">(.*?)</li>', html, re.S).group(1)
    # "until in 14 min (01:52 UTC)" read as two answers at once
    assert reason.startswith("adm is working on it; their claim ends <time datetime=")
    worker = next(x["worker_euid"] for x in selectors.leases() if x["euid"] == lease)
    assert worker not in reason and not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.", html)
    assert "Specimen taken (" + euid + ")" in html


def test_scanning_an_item_you_already_hold_says_so_and_leads_to_it(client, lab):
    euid = make_subject("q1", name="Specimen in hand")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    response = sci.post("/scan/", form_for(sci.get("/scan/"), "/scan/", euid=euid))
    html = response.content.decode()
    reason = re.search(r'<li data-code="ACTIVE_LEASE">(.*?)</li>', html, re.S).group(1)
    assert reason.startswith("You already have it: your claim ends <time")
    assert f'href="/my-work/?item={lease}"' in html


@pytest.mark.parametrize(("role", "acts"), [
    ("worker_human", True), ("admin", True), ("operator", False), ("worker_service", False)])
def test_the_bench_controls_by_role(client, lab, role, acts):
    """Claim next, the work view's controls and the failure kinds: shown to the roles that
    may use them; the others read the pages without them (the server refuses them anyway,
    tests/test_web_roles.py)."""
    euid = make_subject("q1")
    human = signed_in(client, lab["worker_human"])
    lease = claim(human, euid)
    person = signed_in(client, lab[role])
    queue = person.get("/queues/q1/").content.decode()
    assert ('id="claim-next"' in queue) is acts
    work = person.get(f"/my-work/?item={lease}")
    assert work.status_code == 200
    html = work.content.decode()
    mine = role == "worker_human"
    for control in ("renew", "complete", "fail", "release"):
        assert (f"/leases/{lease}/{control}/" in html) is mine


def test_a_lost_claim_taken_back_is_no_longer_reported(client, lab):
    euid = make_subject("q1", name="Specimen back")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    act("expire_queue_lease", actor("admin", username="adm"), lease_euid=lease,
        payload={"reason": "oops"})
    assert 'id="lost-leases"' in sci.get("/my-work/").content.decode()
    claim(sci, euid)
    html = sci.get("/my-work/").content.decode()
    assert 'id="lost-leases"' not in html and f'data-euid="{euid}"' in html


def test_a_person_whose_name_is_stored_oddly_can_still_work(client, lab):
    """A full name typed decomposed ("José") or with a no-break space made the person's
    worker refuse to register, and every bench action with it."""
    person = lab["worker_human"]
    person.first_name, person.last_name = "Jose\u0301", "da\u00a0Silva\u200b"
    person.save()
    euid = make_subject("q1")
    sci = signed_in(client, person)
    claim(sci, euid)
    worker = services.my_worker_euid(person)
    from bloomops.execution.objects import load
    from bloomops.tapdb.tenancy import tenant_of

    assert load(euid=worker, tenant=tenant_of()).props["display_name"] == "Jos\u00e9 da Silva"


def test_signing_out_takes_the_person_off_the_online_coverage(client, lab):
    """A scientist who signed out still counted as online for the queues they could serve,
    for the hour of a person's liveness window: "1 online of 1 rostered" with nobody at
    the bench. Their next action brings them back online."""
    sci = signed_in(client, lab["worker_human"])
    euid = make_subject("q1", name="Tube")
    claim(sci, euid)
    mine = services.my_worker_euid(lab["worker_human"])
    [before] = [w for w in selectors.workers() if w.euid == mine]
    assert before.computed_status == "ONLINE"
    sci.post("/accounts/logout/")
    [after] = [w for w in selectors.workers() if w.euid == mine]
    assert after.computed_status == "OFFLINE"
    assert selectors.leases(status="ACTIVE")  # the claim itself is theirs until it ends
    sci = signed_in(client, lab["worker_human"])
    claim(sci, make_subject("q1", name="Tube 2"))
    [back] = [w for w in selectors.workers() if w.euid == mine]
    assert back.computed_status == "ONLINE"


def test_a_person_who_walked_away_is_offline_once_their_session_would_have_ended(client, lab,
                                                                                settings):
    """An idle session ends without a sign-out (the session store drops it), and a person's
    liveness window was an hour: "1 online" for half an hour after they were signed out."""
    sci = signed_in(client, lab["worker_human"])
    claim(sci, make_subject("q1", name="Tube"))
    mine = services.my_worker_euid(lab["worker_human"])
    clock.advance(settings.SESSION_IDLE_SECONDS - 5)
    assert [w.computed_status for w in selectors.workers() if w.euid == mine] == ["ONLINE"]
    clock.advance(10)
    assert [w.computed_status for w in selectors.workers() if w.euid == mine] == ["OFFLINE"]


def test_signing_out_with_items_held_asks_first_and_says_what_stays_locked(client, lab):
    """A scientist signed out holding items: they stayed locked for up to half an hour, a
    colleague reading "working on it" with no way to take over. The navigation counts what
    they hold, and signing out then asks first."""
    client = signed_in(client, lab["worker_human"])
    page = client.get("/scan/").content.decode()
    signout = page[page.index('<form class="signout"'):].split(">")[0]
    assert "data-confirm" not in signout and 'id="nav-my-work">My work</a>' in page
    worker = services.ensure_my_worker(lab["worker_human"])
    for name in ("Tube one", "Tube two"):
        make_subject("q1", name=name)
        act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
            queue_key="q1")
    page = client.get("/scan/").content.decode()
    signout = page[page.index('<form class="signout"'):].split(">")[0]
    assert 'data-confirm="You hold 2 items: signed out, they stay locked to you' in signout
    assert 'title="items you hold">2<span class="sr-only"> items you hold</span>' in page
    operator = signed_in(client, lab["operator"]).get("/").content.decode()
    assert "data-confirm" not in operator[operator.index('<form class="signout"'):].split(">")[0]


def test_a_scan_s_answer_brings_the_held_count_and_sign_out_s_question_with_it(client, lab):
    """The scan page swaps only its outcome: a claim made there left the navigation saying
    nothing held and signing out asking nothing, though the item stayed locked."""
    client = signed_in(client, lab["worker_human"])
    euid = make_subject("q1", name="Tube scanned")
    answer = client.post("/scan/", form_for(client.get("/scan/"), "/scan/", euid=euid),
                         HTTP_HX_REQUEST="true").content.decode()
    assert 'id="nav-my-work" hx-swap-oob="true">My work <span class="badge held"' in answer
    signout = answer[answer.index('<form class="signout"'):].split(">")[0]
    assert 'hx-swap-oob="true"' in signout and 'data-confirm="You hold 1 item: ' in signout

def test_my_work_s_poll_names_the_claims_that_still_hold(client, lab):
    """... and how long each has left: a claim renewed on another device read "ran out" on
    the tablet, by the countdown the page was sent with, while it held."""
    clock.freeze(clock.now())
    client = signed_in(client, lab["worker_human"])
    poll = {"HTTP_HX_REQUEST": "true", "HTTP_X_BLOOMOPS_POLL": "1"}
    assert client.get("/my-work/?part=held", **poll).json() == {"held": [], "left": {}}
    euid = make_subject("q1", name="Tube polled")
    lease = claim(client, euid)
    ttl = selectors.leases(status="ACTIVE")[0]["props"]["ttl_seconds"]
    assert client.get("/my-work/?part=held", **poll).json() == {
        "held": [lease], "left": {lease: ttl}}
    clock.advance(ttl - 30)
    assert client.get("/my-work/?part=held", **poll).json()["left"] == {lease: 30}
    # renewed elsewhere (another device, signed in as the same person)
    other = signed_in(Client(), lab["worker_human"])
    other.post(f"/leases/{lease}/renew/", form_for(other.get("/my-work/"),
                                                   f"/leases/{lease}/renew/"))
    assert client.get("/my-work/?part=held", **poll).json()["left"] == {lease: ttl}
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
        expected_state="READY", payload={"reason": "label check"})
    assert client.get("/my-work/?part=held", **poll).json() == {"held": [], "left": {}}


def test_renew_all_renews_every_claim_in_one_tap(client, lab):
    """A short QC claim and a long one at once: each had to be renewed on its own card."""
    client = signed_in(client, lab["worker_human"])
    leases = [claim(client, make_subject("q1", name=f"Tube {n}")) for n in range(2)]
    before = {x["euid"]: x["props"]["expires_at"] for x in selectors.leases(status="ACTIVE")}
    clock.advance(60)
    page = client.get("/my-work/")
    assert "Renew all 2" in page.content.decode()
    done = client.post("/my-work/renew-all/", form_for(page, "/my-work/renew-all/"))
    assert said(done) == ["Renewed 2 items."]
    after = {x["euid"]: x["props"]["expires_at"] for x in selectors.leases(status="ACTIVE")}
    assert all(after[lease] > before[lease] for lease in leases)


def test_a_claim_length_another_writer_left_malformed_fails_no_page(client, lab):
    from bloomops.tapdb.db import execute

    client = signed_in(client, lab["worker_human"])
    lease = claim(client, make_subject("q1", name="Tube odd"))
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,ttl_seconds}', '\"long\"') WHERE euid = %s", [lease])
    page = client.get("/my-work/")
    assert page.status_code == 200 and "Tube odd" in page.content.decode()


def test_a_lost_claim_names_who_ended_it_as_they_were_named(client, lab):
    """"qa put the item on hold": My work named the person by their username, where every
    history now prints the name they acted under."""
    from django.contrib.auth.models import Group, User

    from bloomops.execution.context import Actor

    qa = User.objects.create_user("qa-lead", first_name="Quinn", last_name="Avery")
    qa.groups.add(Group.objects.get(name="operator"))
    client = signed_in(client, lab["worker_human"])
    euid = make_subject("q1", name="Tube lost")
    claim(client, euid)
    act("place_execution_hold", Actor.of(qa), subject_euid=euid, expected_state="READY",
        payload={"reason": "label check"})
    page = client.get("/my-work/").content.decode()
    lost = page.split('id="lost-leases"')[1].split("</section>")[0]
    assert "Quinn Avery put the item on hold" in lost


def test_back_to_a_completed_item_shows_no_other_item_in_its_place(client, lab):
    """Back after completing an item reloaded its work view (?item=) as the whole list, the
    next item's Complete button where the old one was: one tap completed the wrong item."""
    first, second = make_subject("q1", name="Specimen one"), make_subject("q1")
    sci = signed_in(client, lab["worker_human"])
    lease, other = claim(sci, first), claim(sci, second)
    view = sci.get(f"/my-work/?item={lease}")
    sci.post(f"/leases/{lease}/complete/", form_for(view, f"/leases/{lease}/complete/"))
    html = sci.get(f"/my-work/?item={lease}").content.decode()
    assert 'id="item-gone"' in html and "All my work (1)" in html
    assert 'id="my-leases"' not in html and f"/leases/{other}/complete/" not in html
    assert f"/leases/{other}/complete/" in sci.get("/my-work/").content.decode()


def test_a_refused_complete_lands_on_that_item_not_the_list(client, lab):
    """Completing without choosing the next queue was refused on top of the whole list, the
    item somewhere below it; the refusal now shows the item it is about."""
    make_queue("fork", next_queue_keys=["q1", "q2"])
    euid = make_subject("fork", name="Specimen fork")
    sci = signed_in(client, lab["worker_human"])
    make_subject("q1")
    lease = claim(sci, euid)
    page = sci.get("/my-work/")
    assert "choose where it goes next" in page.content.decode()
    before = counts()
    response = sci.post(f"/leases/{lease}/complete/",
                        form_for(page, f"/leases/{lease}/complete/", next_queue_key="-choose"))
    assert response.status_code == 302 and response.url == f"/my-work/?item={lease}"
    assert said(response) == ["Choose where the item goes next (or finish its flow) before"
                              " completing it."]
    assert counts() == before
    assert "Work on Specimen fork" in sci.get(response.url).content.decode()


def test_a_refusal_because_the_claim_ended_names_the_item_that_ended(client, lab):
    euid = make_subject("q1", name="Specimen held")
    sci = signed_in(client, lab["worker_human"])
    lease = claim(sci, euid)
    page = sci.get("/my-work/")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
        expected_state="READY", payload={"hold_code": "OPERATOR_HOLD",
                                          "reason": "check the label"})
    response = sci.post(f"/leases/{lease}/complete/", form_for(page, f"/leases/{lease}/complete/"))
    assert response.url == f"/my-work/?item={lease}"
    html = sci.get(response.url).content.decode()
    notice = html[html.index('id="lost-leases"'):]
    assert "This item is no longer yours" in notice and "Specimen held" in notice
    assert "nothing you send for them is recorded" in notice and 'id="item-gone"' not in html


def test_the_list_of_claims_that_ended_says_each_item_once_and_can_be_cleared(client, lab):
    """It kept every lost claim of a day, one item twice, and could not be dismissed: on a
    phone five endings pushed the item just claimed below the fold."""
    sci = signed_in(client, lab["worker_human"])
    qa = actor("operator", username="qa")
    twice = make_subject("q1", name="Tube twice")
    for n in range(2):  # claimed, held, released, claimed again, held again
        claim(sci, twice)
        act("place_execution_hold", qa, subject_euid=twice, expected_state="READY",
            payload={"reason": f"check {n}"})
        if n == 0:
            act("release_execution_hold", qa, subject_euid=twice, expected_state="HELD",
                payload={"reason": "checked"})
    for n in range(6):
        euid = make_subject("q1", name=f"Tube {n}")
        claim(sci, euid)
        act("place_execution_hold", qa, subject_euid=euid, expected_state="READY",
            payload={"reason": "label"})
    html = sci.get("/my-work/").content.decode()
    notice = html.split('id="lost-leases"')[1].split("</section>")[0]
    assert notice.count("<li ") == 5 and "and 2 more before these." in notice
    assert notice.count(">Tube twice<") <= 1
    cleared = sci.post("/my-work/lost-seen/", form_for(sci.get("/my-work/"),
                                                       "/my-work/lost-seen/"))
    assert cleared.status_code == 302
    assert 'id="lost-leases"' not in sci.get("/my-work/").content.decode()
    # a claim that ends afterwards is listed again
    later = make_subject("q1", name="Tube later")
    clock.advance(1)
    claim(sci, later)
    act("place_execution_hold", qa, subject_euid=later, expected_state="READY",
        payload={"reason": "label"})
    notice = sci.get("/my-work/").content.decode().split('id="lost-leases"')[1]
    assert "Tube later" in notice.split("</section>")[0]


def test_a_card_whose_claim_ended_is_told_why_on_asking(client, lab):
    """The card said "Reload My work to see why": the page asks for the one claim instead,
    and is told only of its own person's claims."""
    euid = make_subject("q1")
    person = signed_in(client, lab["worker_human"])
    lease = claim(person, euid)
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=euid,
        expected_state="READY", payload={"reason": "label check"})
    said = person.get(f"/my-work/?part=why&lease={lease}").json()
    assert said == {"said": "qa put the item on hold", "why": "label check"}
    other = signed_in(Client(), lab["operator"])
    assert other.get(f"/my-work/?part=why&lease={lease}").json() == {"said": None, "why": None}
    assert person.get("/my-work/?part=why&lease=nosuch").json() == {"said": None, "why": None}
