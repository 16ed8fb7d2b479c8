"""The Intake screen with Django's test client: the role matrix, a preview that writes
nothing, a confirm that runs only the accepted rows once, and the result CSV."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from bloomops.execution import selectors
from tests.conftest import make_user
from tests.engine import SPECIMEN, counts, envelope, make_queue, make_subject, props
from tests.test_intake import raw_sql_object
from tests.web_support import form_for, signed_in

pytestmark = pytest.mark.django_db
HEADER = "euid,name,template,queue,priority,due_date,site,platform,assay\n"


@pytest.fixture
def intake_lab(tenant, users):
    make_queue("q1", site_scope=["sfo", "rtp"])
    make_queue("analysis", subject_template_codes=["data/analysis/analysis_request/1.0"])
    return users


@pytest.mark.parametrize("role,status", [("operator", 200), ("admin", 200),
                                         ("worker_service", 200), ("worker_human", 403),
                                         ("none", 403)])
def test_role_matrix_of_the_intake_screens(intake_lab, role, status):
    user = intake_lab.get(role) or make_user("nobody-intake")
    client = signed_in(Client(), user)
    before = counts()
    assert client.get("/intake/").status_code == status
    r = client.post("/intake/preview/", {"manifest": HEADER + ",Tube 1,specimen,q1,,,sfo,,\n"})
    assert r.status_code == status
    r = client.post("/intake/confirm/", {"manifest": HEADER + ",Tube 1,specimen,q1,,,sfo,,\n",
                                         "batch_key": "a" * 32, "accepted": "2"})
    # done, the results are a page of their own (a reload asks to send nothing again)
    assert r.status_code == (302 if status == 200 else status)
    if status == 200:
        assert r["Location"] == f"/intake/{'a' * 32}/"
        assert client.get(r["Location"]).status_code == 200
    if status == 403:
        assert counts() == before
    assert client.get(f"/intake/{'a' * 32}/results.csv").status_code == status
    nav = 'href="/intake/"' in client.get("/").content.decode()
    assert nav == (role in ("operator", "admin"))


def test_anonymous_is_sent_to_sign_in(intake_lab):
    r = Client().get("/intake/")
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_preview_checks_every_row_and_writes_nothing_then_confirm_runs_the_good_ones(
        intake_lab):
    client = signed_in(Client(), intake_lab["operator"])
    pending = raw_sql_object(SPECIMEN, "From Bloom", {"site": "sfo"})
    routed = make_subject("q1")
    manifest = (HEADER
                + f"{pending},,specimen,q1,STAT,2030-01-02,,,\n"
                + ",Tube 9,specimen,q1,URGENT,,rtp,ont,wgs\n"
                + f"{routed},,,q1,,,,,\n"                      # already routed
                + ",Tube 10,specimen,analysis,,,,,\n"           # template mismatch
                + ",Tube 11,specimen,q1,SOON,,,,\n"             # bad priority
                + f"{pending},Tube 12,,q1,,,,,\n")              # both EUID and name
    before = counts()
    r = client.post("/intake/preview/", {
        "manifest_file": SimpleUploadedFile("m.csv", manifest.encode("utf-8-sig"))})
    assert r.status_code == 200
    assert counts() == before
    html = r.content.decode()
    assert html.count('data-ok="yes"') == 2 and html.count('data-ok="no"') == 4
    assert "already in a queue&#x27;s work" in html
    assert "does not take content/material/specimen/1.0" in html
    confirm = form_for(r, "/intake/confirm/")
    assert confirm["accepted"] == "2,3"
    r = client.post("/intake/confirm/", confirm, follow=True)
    assert r.status_code == 200 and r.redirect_chain[0][0].startswith("/intake/")
    html = r.content.decode()
    assert html.count('data-outcome="ROUTED"') == 1
    assert html.count('data-outcome="REGISTERED"') == 1
    assert html.count('data-outcome="SKIPPED"') == 4
    env = envelope(pending)
    assert env["state"] == "READY" and env["priority"] == 300
    # due on the 2nd: by the end of the 2nd in the lab's zone (UTC here), not its midnight
    assert env["due_at"] == "2030-01-02T23:59:59.000000Z"
    after = counts()
    # Confirming again (a double submit) replays every row: nothing new.
    client.post("/intake/confirm/", confirm)
    assert counts() == after
    csv_url = next(part.split('"')[1] for part in html.split("href=")[1:]
                   if "results.csv" in part.split('"')[1])
    download = client.get(csv_url)
    assert download["Content-Type"] == "text/csv; charset=utf-8"
    assert download.content.startswith("\ufeff".encode())
    rows = list(csv.DictReader(io.StringIO(download.content.decode("utf-8-sig"))))
    # the file stands alone: each row as it was asked (priority, due date) and what came of it
    assert [(r["priority"], r["due_date"]) for r in rows[:2]] == [
        ("STAT", "2030-01-02"), ("URGENT", "")]
    assert [r["outcome"] for r in rows] == ["ROUTED", "REGISTERED", "SKIPPED", "SKIPPED",
                                            "SKIPPED", "SKIPPED"]
    # Each skipped row says why, as its preview did (it said "Not accepted at preview").
    assert "already in a queue's work" in rows[2]["message"]
    assert "does not take content/material/specimen/1.0" in rows[3]["message"]
    assert all(r["message"] and "Not accepted at preview" not in r["message"]
               for r in rows[2:])
    assert rows[0]["subject_euid"] == pending and rows[1]["name"] == "Tube 9"
    assert rows[1]["subject_euid"].startswith("Z-")
    # Another person's session has no such results.
    other = signed_in(Client(), intake_lab["admin"])
    assert other.get(csv_url).status_code == 404


@pytest.mark.parametrize("manifest,words", [
    ("", "empty"),
    ("euid,prioirty,queue\n", "did you mean &#x27;priority&#x27;?"),
    ("name,template\nTube,specimen\n", "needs a queue column"),
    (HEADER, "no rows"),
    ("name,queue\n" + "T,q1\n" * 201, "At most 200"),
])
def test_a_manifest_that_cannot_be_read_is_refused_whole(intake_lab, manifest, words):
    client = signed_in(Client(), intake_lab["operator"])
    before = counts()
    r = client.post("/intake/preview/", {"manifest": manifest})
    assert r.status_code == 400 and words in r.content.decode()
    assert counts() == before


def test_confirm_refuses_a_forged_batch_key_and_a_changed_row_is_refused_by_the_engine(
        intake_lab):
    client = signed_in(Client(), intake_lab["operator"])
    r = client.post("/intake/confirm/", {"manifest": HEADER + ",T,specimen,q1,,,,,\n",
                                         "batch_key": "../x", "accepted": "2"})
    assert r.status_code == 400
    r = client.post("/intake/preview/", {"manifest": HEADER + ",T,specimen,q1,,,sfo,,\n"})
    confirm = form_for(r, "/intake/confirm/")
    client.post("/intake/confirm/", confirm)
    before = counts()
    # The same batch and line with other content (posted from another session, which holds
    # no results of the batch): the engine refuses, nothing written.
    confirm["manifest"] = HEADER + ",Other,specimen,q1,,,sfo,,\n"
    r = signed_in(Client(), intake_lab["operator"]).post("/intake/confirm/", confirm,
                                                         follow=True)
    assert 'data-outcome="REFUSED"' in r.content.decode()
    assert "IDEMPOTENCY_CONFLICT" in r.content.decode()
    assert counts() == before


def test_results_are_a_page_a_reload_or_back_never_sends_again(intake_lab):
    """The results were the answer to the confirmation's POST: reloading them, or Back to
    them, asked the browser to send the confirmation again."""
    client = signed_in(Client(), intake_lab["operator"])
    preview = client.post("/intake/preview/",
                          {"manifest": HEADER + ",Tube 80,specimen,q1,,,sfo,,\n"})
    done = client.post("/intake/confirm/", form_for(preview, "/intake/confirm/"))
    assert done.status_code == 302
    after = counts()
    page = client.get(done["Location"])
    assert page.status_code == 200 and page.content.decode().count(
        'data-outcome="REGISTERED"') == 1 and 'id="intake-again"' not in page.content.decode()
    assert client.get(done["Location"]).status_code == 200 and counts() == after
    # another person's session has no such results, nor a made-up batch
    other = signed_in(Client(), intake_lab["admin"])
    assert other.get(done["Location"]).status_code == 404
    assert client.get(f"/intake/{'b' * 32}/").status_code == 404


def test_confirming_a_batch_again_shows_its_first_results_and_keeps_its_csv(intake_lab):
    """Back to the preview and Confirm again replayed every row, and the results (and the
    result CSV the person had kept) were rewritten as 'Already done before'."""
    client = signed_in(Client(), intake_lab["operator"])
    preview = client.post("/intake/preview/", {
        "manifest": HEADER + ",Tube 70,specimen,q1,,,sfo,,\n,Tube 71,specimen,q1,SOON,,,,\n"})
    confirm = form_for(preview, "/intake/confirm/")
    first = client.post("/intake/confirm/", confirm, follow=True).content.decode()
    url = f"/intake/{confirm['batch_key']}/results.csv"
    kept = client.get(url).content
    after = counts()
    again = client.post("/intake/confirm/", confirm, follow=True).content.decode()
    assert counts() == after
    assert 'id="intake-again"' in again and 'id="intake-again"' not in first
    assert "Already done before" not in again
    assert again.count('data-outcome="REGISTERED"') == 1
    assert again.count('data-outcome="SKIPPED"') == 1
    assert client.get(url).content == kept


def test_the_preview_warns_of_a_name_already_registered_and_refuses_one_given_twice(
        intake_lab):
    """The same manifest uploaded again previewed "OK: will register" for every row, and
    confirming it registered every specimen twice: a name already registered is warned of
    (the row still runs). One given twice in the manifest is refused: both were registered,
    and scanning the name was then refused as ambiguous."""
    client = signed_in(Client(), intake_lab["operator"])
    existing = make_subject("q1", name="Walk3 Specimen A")
    manifest = (HEADER + ",walk3 specimen a,specimen,q1,,,sfo,,\n"
                + ",Tube 20,specimen,q1,,,sfo,,\n"
                + ",TUBE 20 ,specimen,q1,,,rtp,,\n"
                + ",Tube 21,specimen,q1,,,sfo,,\n")
    html = client.post("/intake/preview/", {"manifest": manifest}).content.decode()
    rows = {n: html.split(f'data-line="{n}"')[1].split("</tr>")[0] for n in (2, 3, 4, 5)}
    # in any case: the same tube typed twice
    assert f"&#x27;walk3 specimen a&#x27; is already registered ({existing})" in rows[2]
    assert "Warning" not in rows[3]
    assert 'data-ok="no"' in rows[4] and "Line 3 has the same name" in rows[4]
    assert "Warning" not in rows[5]
    assert html.count('data-ok="yes"') == 3


def test_a_row_named_like_a_registered_subject_runs_only_when_ticked(intake_lab):
    """Warned of, the row still ran: the same manifest confirmed twice registered every
    specimen twice, and the bench's scan of a name was then ambiguous. Now it runs only when
    the person ticks it; unticked, the result says why it was skipped."""
    client = signed_in(Client(), intake_lab["operator"])
    make_subject("q1", name="Tube 30")
    make_subject("q1", name="Tube 31")
    manifest = (HEADER + ",Tube 30,specimen,q1,,,sfo,,\n" + ",Tube 31,specimen,q1,,,sfo,,\n"
                + ",Tube 32,specimen,q1,,,sfo,,\n")
    preview = client.post("/intake/preview/", {"manifest": manifest})
    html = preview.content.decode()
    assert "1 row ready, 2 with a warning, 0 with problems" in html
    assert html.count('name="also"') == 2 and "Confirm: run 1 row and those ticked" in html
    confirm = form_for(preview, "/intake/confirm/")
    assert confirm["accepted"] == "4" and "also" not in confirm
    done = client.post("/intake/confirm/", {**confirm, "also": ["3"]}, follow=True)
    outcomes = dict(re.findall(r'data-line="(\d)" data-outcome="([A-Z]+)"',
                               done.content.decode()))
    assert outcomes == {"2": "SKIPPED", "3": "REGISTERED", "4": "REGISTERED"}
    assert "It was not ticked to register anyway." in done.content.decode()
    assert len(selectors.subjects_named(["Tube 30"])["Tube 30"]) == 1
    assert len(selectors.subjects_named(["Tube 31"])["Tube 31"]) == 2


@pytest.mark.parametrize(("heading", "refused"), [
    ("prioirty", "did you mean &#x27;priority&#x27;?"),
    ("qeueu", "did you mean &#x27;queue&#x27;?"), ("queue_ky", None),
    ("plate", None), ("uid", None), ("template_id", None), ("Conc (ng/uL)", None)])
def test_a_slip_of_a_column_is_refused_and_a_lab_s_own_column_is_not(intake_lab, heading,
                                                                     refused):
    """"plate" was refused as a slip of "template" and "uid" of "euid": a plate column is in
    almost every lab's manifest."""
    client = signed_in(Client(), intake_lab["operator"])
    r = client.post("/intake/preview/", {
        "manifest": f"name,template,queue,site,{heading}\nTube 70,specimen,q1,sfo,x\n"})
    html = r.content.decode()
    if refused:
        assert r.status_code == 400 and refused in html
    else:
        assert html.count('data-ok="yes"') == 1 and "Not read, and not kept" in html


def test_columns_a_lab_adds_are_left_out_and_said(intake_lab):
    """A lab's own column ("Conc (ng/uL)") refused the whole upload, its heading
    lower-cased; a semicolon export (a spreadsheet with a decimal comma) and cells pasted
    from a spreadsheet (tabs) were read as one unknown column."""
    client = signed_in(Client(), intake_lab["operator"])
    for manifest in ("name,template,queue,Conc (ng/uL),site\nTube 30,specimen,q1,12.5,sfo\n",
                     "name;template;queue;Conc (ng/uL);site\nTube 30;specimen;q1;12,5;sfo\n",
                     "name\ttemplate\tqueue\tConc (ng/uL)\tsite\n"
                     "Tube 30\tspecimen\tq1\t12.5\tsfo\n"):
        html = client.post("/intake/preview/", {"manifest": manifest}).content.decode()
        assert html.count('data-ok="yes"') == 1, manifest
        assert "Not read, and not kept: column &#x27;Conc (ng/uL)&#x27;" in html
        row = html.split('data-line="2"')[1].split("</tr>")[0]
        assert "<td>Tube 30</td>" in row and "<td>sfo</td>" in row


def test_a_previewed_manifest_is_edited_without_pasting_it_again(intake_lab):
    """"Start over" threw the pasted text away: fixing 4 rows of 200 meant pasting again."""
    client = signed_in(Client(), intake_lab["operator"])
    manifest = HEADER + ",Tube 40,specimen,q1,,,sfo,,\n,Tube 41,specimen,no_such,,,sfo,,\n"
    preview = client.post("/intake/preview/", {"manifest": manifest})
    edit = form_for(preview, "/intake/confirm/")
    before = counts()
    page = client.post("/intake/", {k: v for k, v in edit.items() if k != "batch_key"})
    assert page.status_code == 200 and counts() == before
    textarea = page.content.decode().split('id="manifest-text"')[1].split("</textarea>")[0]
    assert "Tube 41,specimen,no_such" in textarea


def test_the_name_check_reads_the_names_asked_about_not_every_object(intake_lab, settings):
    """The preview's check read every object's name (TapDB indexes none): 110 ms a preview
    at 155,000 instances, and growing with every lease and record a lab writes."""
    from django.db import connection

    from bloomops.execution import selectors
    from tests.plans import plan_of

    existing = make_subject("q1", name="Walk3 Specimen A")
    for i in range(30):
        make_subject("q1", name=f"other {i}")
    settings.BLOOMOPS_PREPARED_STATEMENTS = False
    sent = []
    with connection.execute_wrapper(lambda ex, sql, params, many, ctx: (
            sent.append((sql, params)), ex(sql, params, many, ctx))[1]):
        found = selectors.subjects_named(["WALK3 specimen a ", "nobody"])
    assert found == {"WALK3 specimen a": [existing]}
    ((sql, params),) = sent
    plan = plan_of(sql, params, off=("seqscan", "bitmapscan"), analyze=("generic_instance",))
    assert "bloomops_subject_name" in plan, plan


def test_refusals_name_the_manifest_s_columns_and_the_form_explains_priorities(intake_lab):
    """Refusals said template_code, queue_key and due_at; the person wrote template, queue
    and due_date. The form said "or a number" and nothing of what a number means."""
    client = signed_in(Client(), intake_lab["operator"])
    form = client.get("/intake/").content.decode()
    assert "200 and above is URGENT, 300 and above is STAT" in form
    manifest = (HEADER + ",Tube 1,,q1,,,sfo,,\n"
                + ",Tube 2,specimen,q1,,next tuesday,sfo,,\n")
    html = client.post("/intake/preview/", {"manifest": manifest}).content.decode()
    rows = {n: html.split(f'data-line="{n}"')[1].split("</tr>")[0] for n in (2, 3)}
    assert "template is required" in rows[2] and "template_code" not in rows[2]
    assert "due_date must be an ISO 8601 timestamp" in rows[3] and "due_at" not in rows[3]


def test_a_due_date_is_read_in_the_lab_s_zone(intake_lab, settings):
    """A date alone was midnight UTC: due on the 2nd, an item was overdue all of the 2nd (and
    in Berlin from 01:00 on the 1st's evening). A time without a zone is the lab's clock."""
    settings.TIME_ZONE = "Europe/Berlin"
    client = signed_in(Client(), intake_lab["operator"])
    assert "the lab's time, Europe/Berlin" in client.get("/intake/").content.decode()
    names = ("Tube winter", "Tube summer", "Tube zoned", "Tube no day")
    manifest = (HEADER + f",{names[0]},specimen,q1,,2030-01-02,sfo,,\n"
                + f",{names[1]},specimen,q1,,2030-07-02 14:30,sfo,,\n"
                + f",{names[2]},specimen,q1,,2030-07-02T14:30:00Z,sfo,,\n"
                + f",{names[3]},specimen,q1,,2030-02-30,sfo,,\n")
    preview = client.post("/intake/preview/", {"manifest": manifest})
    assert "due_date must be an ISO 8601 timestamp" in preview.content.decode().split(
        'data-line="5"')[1].split("</tr>")[0]
    client.post("/intake/confirm/", form_for(preview, "/intake/confirm/"))
    named = selectors.subjects_named(list(names))
    due = {name: envelope(euids[0])["due_at"] for name, euids in named.items()}
    assert due == {"Tube winter": "2030-01-02T22:59:59.000000Z",   # 23:59:59 CET
                   "Tube summer": "2030-07-02T12:30:00.000000Z",   # 14:30 CEST
                   "Tube zoned": "2030-07-02T14:30:00.000000Z"}    # as written


def test_a_time_the_labs_clocks_skip_is_refused_not_moved(intake_lab, settings):
    """2030-03-31 02:30 in Berlin (the clocks go from 02:00 to 03:00) was taken as 03:30."""
    settings.TIME_ZONE = "Europe/Berlin"
    client = signed_in(Client(), intake_lab["operator"])
    manifest = (HEADER + ",Tube skipped,specimen,q1,,2030-03-31 02:30,sfo,,\n"
                + ",Tube after,specimen,q1,,2030-03-31 03:30,sfo,,\n")
    html = client.post("/intake/preview/", {"manifest": manifest}).content.decode()
    rows = {n: html.split(f'data-line="{n}"')[1].split("</tr>")[0] for n in (2, 3)}
    assert ("2030-03-31 02:30 is a time the lab&#x27;s clocks skip (Europe/Berlin: they go"
            " forward that night); give one that exists.") in rows[2]
    assert 'data-ok="yes"' in rows[3]

def test_a_site_typed_in_another_case_is_the_queue_s_site(intake_lab):
    """"SFO" was refused ("this subject's site is 'SFO'") where stat and Name were read in
    any case; and a spreadsheet's trailing tab in the header was said as column ''."""
    client = signed_in(Client(), intake_lab["operator"])
    manifest = "name\ttemplate\tqueue\tsite\t\r\nTube 50\tspecimen\tq1\tSFO\t\r\n"
    html = client.post("/intake/preview/", {"manifest": manifest}).content.decode()
    assert html.count('data-ok="yes"') == 1 and "Not read" not in html
    confirm = form_for(client.post("/intake/preview/", {"manifest": manifest}),
                       "/intake/confirm/")
    done = client.post("/intake/confirm/", confirm, follow=True).content.decode()
    euid = re.search(r'href="/subjects/(Z-[^/]+)/"', done).group(1)
    assert props(euid)["site"] == "sfo"  # as the queue spells it
    # a value no scope spells in any case is left to the engine, which says why
    html = client.post("/intake/preview/", {"manifest": manifest.replace("SFO", "LAX")}
                       ).content.decode()
    assert "serves site sfo, rtp" in html


def test_a_site_spelt_as_no_queue_spells_it_but_in_another_case_is_warned_of(intake_lab):
    """"Main" into a queue with no site scope previewed OK; the next queue served "main",
    the sample was out of its scope there, and no screen can change a subject's site."""
    make_queue("acc", display_name="Accession")
    client = signed_in(Client(), intake_lab["operator"])
    manifest = (HEADER + ",Tube 60,specimen,acc,,,SFO,,\n" + ",Tube 61,specimen,acc,,,sfo,,\n"
                + ",Tube 62,specimen,acc,,,LAX,,\n" + ",Tube 63,specimen,q1,,,RTP,,\n")
    html = client.post("/intake/preview/", {"manifest": manifest}).content.decode()
    rows = {n: html.split(f'data-line="{n}"')[1].split("</tr>")[0] for n in (2, 3, 4, 5)}
    assert ("Site &#x27;SFO&#x27; is spelt &#x27;sfo&#x27; by the lab&#x27;s queues: as"
            " &#x27;SFO&#x27; it is outside every queue scoped to &#x27;sfo&#x27;.") in rows[2]
    assert 'name="also" value="2"' in rows[2]  # it runs only when ticked, and says so
    assert "Only if ticked: will register" in rows[2] and "OK: will" not in rows[2]
    assert "1 with a warning" in html
    # spelt as the queues spell it, in none of their spellings, or into a queue whose own
    # scope takes it in its spelling: nothing to say
    assert all("Warning" not in rows[n] for n in (3, 4, 5))

def test_a_queue_named_in_another_case_is_that_queue(intake_lab):
    """"SPECIMEN" was read as the template, and "Q1" was refused as no queue."""
    client = signed_in(Client(), intake_lab["operator"])
    manifest = HEADER + ",Tube 70,SPECIMEN,Q1,,,sfo,,\n" + ",Tube 71,specimen,Q9,,,sfo,,\n"
    html = client.post("/intake/preview/", {"manifest": manifest}).content.decode()
    rows = {n: html.split(f'data-line="{n}"')[1].split("</tr>")[0] for n in (2, 3)}
    assert 'data-ok="yes"' in rows[2] and "into q1" in rows[2]
    assert 'data-ok="no"' in rows[3]
    # its results, on screen and in the file, name the queue it went to as the lab spells it
    confirm = form_for(client.post("/intake/preview/", {"manifest": manifest}),
                       "/intake/confirm/")
    done = client.post("/intake/confirm/", confirm, follow=True).content.decode()
    download = client.get(f"/intake/{confirm['batch_key']}/results.csv")
    results = list(csv.DictReader(io.StringIO(download.content.decode("utf-8-sig"))))
    assert [(r["name"], r["queue"], r["outcome"]) for r in results] == [
        ("Tube 70", "q1", "REGISTERED"), ("Tube 71", "Q9", "SKIPPED")]
    assert "<td>Q1</td>" not in done

def test_a_name_a_spreadsheet_saved_decomposed_or_with_a_non_breaking_space_is_read_as_typed(
        intake_lab):
    """A Mac's "Å" (A and a combining ring) was refused as "not in Unicode's composed form",
    and a spreadsheet's non-breaking space as an invisible character: both as typed now."""
    client = signed_in(Client(), intake_lab["operator"])
    manifest = (HEADER + ",A\u030angstr\u00f6m 1,specimen,q1,,,sfo,,\n"
                + ",Tube\u00a072,specimen,q1,,,sfo,,\n")
    confirm = form_for(client.post("/intake/preview/", {"manifest": manifest}),
                       "/intake/confirm/")
    assert confirm["accepted"] == "2,3"
    client.post("/intake/confirm/", confirm)
    assert selectors.subjects_named(["\u00c5ngstr\u00f6m 1", "Tube 72"]).keys() == {
        "\u00c5ngstr\u00f6m 1", "Tube 72"}

def test_a_forged_confirmation_never_runs_a_row_the_manifest_refuses(intake_lab):
    """The preview refused the second of two rows of one name, but a confirmation naming
    both lines as accepted registered both."""
    client = signed_in(Client(), intake_lab["operator"])
    manifest = HEADER + ",DupTube,specimen,q1,,,sfo,,\n,duptube,specimen,q1,,,sfo,,\n"
    done = client.post("/intake/confirm/", {"manifest": manifest, "accepted": "2,3",
                                            "batch_key": "a" * 32}, follow=True).content.decode()
    assert 'data-line="3" data-outcome="SKIPPED"' in done
    assert "Line 2 has the same name" in done
    from bloomops.tapdb.db import fetch_value

    assert fetch_value("SELECT count(*) FROM generic_instance WHERE lower(name) = 'duptube'"
                       " AND NOT is_deleted") == 1


def test_values_under_a_blank_heading_are_said_not_dropped_silently(intake_lab):
    """A heading left blank over a column of sites dropped every site without a word."""
    client = signed_in(Client(), intake_lab["operator"])
    html = client.post("/intake/preview/", {
        "manifest": "name,queue,template,,assay\nTube 60,q1,specimen,rtp,wgs\n"}
    ).content.decode()
    assert "Not read, and not kept: the values under column 4, which has no heading." in html
