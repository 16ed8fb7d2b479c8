"""Results at the bench and on the console (docs/RULES.md#results): an admin declares what a
queue's step records on its settings page; a person completing an item is asked for each
(a measurement with its unit and bounds, QC pass or fail) and a refusal gives back what they
typed; the inspector shows what each attempt recorded."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from bloomops.execution import selectors
from tests.engine import SPECIMEN, act, actor, counts, make_queue, make_subject
from tests.test_web_bench import claim
from tests.web_support import form_for, signed_in

pytestmark = pytest.mark.django_db

RESULTS = [
    {"key": "rin", "label": "RIN", "min": 1, "max": 10, "required": True},
    {"key": "conc", "label": "Concentration", "unit": "ng/µL", "min": 0},
    {"key": "qc", "label": "QC", "kind": "pass_fail", "required": True},
    {"key": "grade", "label": "Gel grade", "kind": "choice", "choices": ["A", "B  2"]},
]


def _settings(page, **typed) -> dict:
    """The settings form as a browser sends it (the test parser leaves out checkboxes)."""
    return {**form_for(page, "/settings/queues/cfgq/", **typed),
            "eligible_states": ["READY", "FAILED_RETRYABLE"], "operator_visible": "on",
            "diagnostics_enabled": "on"}


def _said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def qc_line(lab):
    make_queue("qcq", display_name="Post-extraction QC", required_worker_capabilities=[],
               result_fields=RESULTS)
    return lab


def _leased(client, user) -> tuple:
    euid = make_subject("qcq", name="Specimen 0007")
    sci = signed_in(client, user)
    return sci, euid, claim(sci, euid)


def _completing(client, user, **typed):
    """A QC item claimed and Complete sent with these results typed (rin=, conc=, qc=): the
    answer, the subject and the lease, and whether anything was written."""
    sci, euid, lease = _leased(client, user)
    page = sci.get("/my-work/")
    before = counts()
    answer = sci.post(f"/leases/{lease}/complete/", form_for(
        page, f"/leases/{lease}/complete/", **{f"result.{k}": v for k, v in typed.items()}))
    return answer, euid, lease, counts() != before


def _completed_with(client, user, conc: str):
    """Complete sent with RIN 8, QC pass and this concentration typed (``_completing``)."""
    return _completing(client, user, rin="8", conc=conc, qc="pass")


def test_the_complete_form_asks_for_each_result_the_queue_declares(client, qc_line):
    sci, _, lease = _leased(client, qc_line["worker_human"])
    html = sci.get("/my-work/").content.decode()
    form = html[html.index(f'action="/leases/{lease}/complete/"'):]
    form = form[:form.index("</form>")]
    assert "<legend>Results to record</legend>" in form
    assert re.search(r'<label for="res-[^"]+-rin">RIN <span class="muted">\(required\)', form)
    # a text field: a number field dropped the comma of "12,5" and sent 125; the bounds are
    # said beside it and held by the engine
    assert re.search(r'<input type="text" inputmode="decimal"[^>]* name="result.rin"', form)
    assert '<span class="muted">from 1 to 10</span>' in form
    assert '<span class="muted">at least 0</span>' in form
    assert "Concentration (ng/µL)" in form
    # pass or fail: two radios, the first required, nothing chosen for the person
    assert form.count('name="result.qc"') == 2 and "checked" not in form.split("QC")[1]
    # a choice from a list, none chosen for the person, each value exactly as declared
    assert re.search(r'<select id="res-[^"]+-grade" name="result.grade"><option value="">'
                     r'choose…</option><option value="A">A</option><option value="B  2">', form)


def test_completing_records_the_results_typed_and_says_them(client, qc_line):
    sci, euid, lease = _leased(client, qc_line["worker_human"])
    page = sci.get("/my-work/")
    done = sci.post(f"/leases/{lease}/complete/", form_for(
        page, f"/leases/{lease}/complete/", **{"result.rin": "8.2", "result.conc": "41",
                                                "result.qc": "fail", "result.grade": "B  2"}))
    assert done.status_code == 302
    assert any("(recorded RIN 8.2, Concentration 41 ng/µL, QC fail, Gel grade B  2)" in m
               for m in _said(done)), _said(done)
    record = selectors.subject_history(selectors.subject_diagnostics(euid).uid)["records"][0]
    # numbers as numbers, not the text typed
    assert record["props"]["result_snapshot"] == {"rin": 8.2, "conc": 41, "qc": "fail",
                                                  "grade": "B  2"}
    inspector = sci.get(f"/subjects/{euid}/").content.decode()
    recorded = inspector[inspector.index('class="facts recorded"'):]
    recorded = recorded[:recorded.index("</dl>")]
    assert "<dt>RIN</dt><dd>8.2</dd>" in recorded
    assert "<dt>Concentration</dt><dd>41 ng/µL</dd>" in recorded
    assert "<dt>QC</dt><dd>fail</dd>" in recorded


def test_a_result_out_of_bounds_is_refused_in_words_and_given_back(client, qc_line):
    refused, _, lease, wrote = _completing(client, qc_line["worker_human"], rin="12",
                                           conc="4 1", qc="")
    assert not wrote
    # back on the item, each problem on its own line, what was typed in the form again
    assert refused["Location"] == f"/my-work/?item={lease}"
    told = _said(refused)
    # by the label the form shows (the key beside it is the API's word)
    assert "RIN must be from 1 to 10." in told
    assert "Concentration must be a number." in told
    assert "Record QC: this step requires it." in told
    again = client.get(refused["Location"]).content.decode()
    assert 'name="result.rin" value="12"' in again and 'name="result.conc" value="4 1"' in again
    # each problem under the field it is of, and the field told so (a screen reader says it)
    rin = again[again.index('<p class="result" data-key="rin">'):]
    rin = rin[:rin.index("</p>")]
    assert re.search(r'<span class="error field-problem" id="res-[^"]+-rin-problem">RIN must'
                     r' be from 1 to 10\.</span>', rin)
    assert 'aria-invalid="true" aria-describedby="res-' in rin
    qc = again[again.index('<p class="result" data-key="qc">'):]
    assert "Record QC: this step requires it." in qc[:qc.index("</p>")]
    grade = again[again.index('<p class="result" data-key="grade">'):]
    assert "field-problem" not in grade[:grade.index("</p>")]  # nothing wrong with it
    assert selectors.leases(status="ACTIVE")[0]["euid"] == lease  # still theirs to complete


def test_an_admin_declares_results_on_the_settings_page(client, lab):
    act("create_queue", actor("admin", username="adm"), queue_key="cfgq", payload={
        "subject_template_codes": [SPECIMEN], "reason": "new", "required_worker_capabilities":
        ["wetlab.qc"]})
    admin = signed_in(client, lab["admin"])
    page = admin.get("/settings/queues/cfgq/")
    html = page.content.decode()
    assert 'id="result-rows"' in html and 'name="result-0-key"' in html
    fields = _settings(page, **{
        "result-0-key": "rin", "result-0-label": "RIN", "result-0-min": "1",
        "result-0-max": "10", "result-0-required": "on",
        "result-1-key": "qc", "result-1-kind": "pass_fail",
        "result-2-key": "grade", "result-2-kind": "choice", "result-2-choices": "A, B,C"})
    preview = admin.post("/settings/queues/cfgq/", fields)
    shown = preview.content.decode()
    row = shown[shown.index('data-field="result_fields"'):]
    assert ("RIN (rin): number from 1 to 10, required; qc: pass or fail; grade: one of A, B, C"
            in row[:row.index("</tr>")])
    save = form_for(preview, "/settings/queues/cfgq/save/", reason="QC records RIN")
    assert admin.post("/settings/queues/cfgq/save/", save).status_code == 302
    stored = selectors.queue_config("cfgq")["config"]["result_fields"]
    assert stored == [{"key": "rin", "label": "RIN", "kind": "number", "min": 1, "max": 10,
                       "required": True},
                      {"key": "qc", "label": "qc", "kind": "pass_fail", "required": False},
                      {"key": "grade", "label": "grade", "kind": "choice",
                       "choices": ["A", "B", "C"], "required": False}]
    # shown again as rows, a blank one below for the next
    again = admin.get("/settings/queues/cfgq/").content.decode()
    assert 'name="result-1-key" value="qc"' in again and 'name="result-3-key" value=""' in again
    assert 'name="result-2-choices" value="A, B, C"' in again


def test_a_result_row_the_engine_could_not_hold_a_completion_to_is_refused_on_preview(
        client, lab):
    act("create_queue", actor("admin", username="adm"), queue_key="cfgq", payload={
        "subject_template_codes": [SPECIMEN], "reason": "new", "required_worker_capabilities":
        ["wetlab.qc"]})
    admin = signed_in(client, lab["admin"])
    page = admin.get("/settings/queues/cfgq/")
    before = counts()
    for typed, said in (({"result-0-key": "RIN value"}, "key must be lowercase"),
                        ({"result-0-key": "rin", "result-0-min": "ten"},
                         "must be a number"),
                        ({"result-0-key": "qc", "result-0-kind": "pass_fail",
                          "result-0-unit": "%"}, "belongs to a number only")):
        refused = admin.post("/settings/queues/cfgq/", _settings(page, **typed))
        assert refused.status_code == 400 and any(said in m for m in _said(refused)), \
            _said(refused)
        # the row comes back as typed, to be mended
        assert f'value="{typed["result-0-key"]}"' in refused.content.decode()
    # three bad rows: each said on its own line at once, named as the page names them
    refused = admin.post("/settings/queues/cfgq/", _settings(page, **{
        "result-0-key": "rin", "result-0-min": "10", "result-0-max": "1",
        "result-1-key": "qc", "result-1-kind": "pass_fail", "result-1-unit": "%",
        "result-2-key": "grade", "result-2-kind": "choice", "result-2-choices": "A"}))
    told = _said(refused)
    assert "Result field rin: min is above max." in told
    assert "Result field qc: unit belongs to a number only." in told
    assert "Result field grade: choices must list 2 to 20 values." in told, told
    assert counts() == before


def test_a_completion_with_nothing_typed_reads_no_declaration(client, qc_line,
                                                              django_assert_num_queries):
    """Most steps record nothing: their Complete read the lease and its queue for nothing."""
    from django.http import QueryDict

    from bloomops.web.bench_items import result_of_form

    _, _, lease = _leased(client, qc_line["worker_human"])
    with django_assert_num_queries(0):
        assert result_of_form(QueryDict("next_queue_key=&result.rin=+"), lease) == ({}, "")
    assert result_of_form(QueryDict("result.rin=8.5"), lease) == ({"rin": 8.5},
                                                                   " (recorded RIN 8.5)")


def test_a_refused_completion_comes_back_with_the_next_queue_chosen(client, lab):
    """The results typed came back; the next queue chosen fell back to the flow's default,
    and a resubmit sent the item where the person had not chosen."""
    for key in ("lib_a", "lib_b"):
        make_queue(key, required_worker_capabilities=[])
    make_queue("qcq", required_worker_capabilities=[], result_fields=RESULTS,
               default_next_queue_key="lib_a", next_queue_keys=["lib_b"])
    sci, _, lease = _leased(client, lab["worker_human"])
    page = sci.get("/my-work/")
    assert re.search(r'<option value="lib_a" selected>', page.content.decode())
    refused = sci.post(f"/leases/{lease}/complete/", form_for(
        page, f"/leases/{lease}/complete/", next_queue_key="lib_b",
        **{"result.rin": "12", "result.qc": "pass"}))
    again = sci.get(refused["Location"]).content.decode()
    form = again[again.index(f'action="/leases/{lease}/complete/"'):]
    form = form[:form.index("</form>")]
    assert '<option value="lib_b" selected>' in form
    assert '<option value="lib_a" selected>' not in form
    # "none: finish the flow" is a choice as well, where the person must choose one
    make_queue("qcf", required_worker_capabilities=[], result_fields=RESULTS,
               next_queue_keys=["lib_b"])
    other = claim(sci, make_subject("qcf", name="Specimen 0008"))
    page = sci.get("/my-work/")
    refused = sci.post(f"/leases/{other}/complete/", form_for(
        page, f"/leases/{other}/complete/", next_queue_key="", **{"result.rin": "12"}))
    again = sci.get(refused["Location"]).content.decode()
    form = again[again.index(f'action="/leases/{other}/complete/"'):]
    form = form[:form.index("</form>")]
    assert '<option value="" selected>none: finish the flow</option>' in form
    assert "selected>" not in form.replace('<option value="" selected>', ""), form



def test_a_complete_refused_for_its_next_queue_says_what_its_results_lack_too(client, lab):
    """No next queue chosen and a RIN out of range: the refusal said the first only, and the
    corrected form was refused again for the second."""
    make_queue("lib_b", required_worker_capabilities=[])
    make_queue("qcq", required_worker_capabilities=[], result_fields=RESULTS,
               next_queue_keys=["lib_b"])
    sci, euid, lease = _leased(client, lab["worker_human"])
    page = sci.get("/my-work/")
    before = counts()
    refused = sci.post(f"/leases/{lease}/complete/", form_for(
        page, f"/leases/{lease}/complete/", next_queue_key="-choose",
        **{"result.rin": "42", "result.conc": "3", "result.qc": ""}))
    assert counts() == before and refused["Location"] == f"/my-work/?item={lease}"
    assert _said(refused) == [  # in the card's order: results, then where it goes
        "RIN must be from 1 to 10.", "Record QC: this step requires it.",
        "Choose where the item goes next (or finish its flow) before completing it."]
    card = sci.get(refused["Location"]).content.decode()
    for name in ("result.rin", "result.qc"):  # each marked where it is typed
        field = card[card.index(f'name="{name}"') - 300:card.index(f'name="{name}"') + 300]
        assert 'aria-invalid="true"' in field, name
    assert f'id="next-{lease}-problem">Choose where the item goes next' in card
    assert 'name="result.rin" value="42"' in card  # given back as typed
    # results in order, only the choice is missing: that alone is said
    refused = sci.post(f"/leases/{lease}/complete/", form_for(
        page, f"/leases/{lease}/complete/", next_queue_key="-choose",
        **{"result.rin": "8", "result.qc": "pass"}))
    assert _said(refused) == [
        "Choose where the item goes next (or finish its flow) before completing it."]
    assert counts() == before

def test_renaming_a_result_field_says_what_its_recorded_values_become(client, lab):
    """A key renamed (conc -> conc_ng) previewed as a rename alone; afterwards every value
    recorded so far showed apart, under "also recorded", and left the tally."""
    act("create_queue", actor("admin", username="adm"), queue_key="cfgq", payload={
        "subject_template_codes": [SPECIMEN], "reason": "new", "result_fields": RESULTS,
        "required_worker_capabilities": []})
    sci = signed_in(Client(), lab["worker_human"])
    for n in range(2):
        lease = claim(sci, make_subject("cfgq", name=f"Specimen {n}"))
        done = sci.post(f"/leases/{lease}/complete/", form_for(
            sci.get("/my-work/"), f"/leases/{lease}/complete/",
            **{"result.rin": "8", "result.conc": "12.5", "result.qc": "pass"}))
        assert done.status_code == 302 and "Completed" in _said(done)[-1]
    admin = signed_in(client, lab["admin"])
    page = admin.get("/settings/queues/cfgq/")
    # the kinds as the page selects them (the test parser takes a list's first option)
    renamed = {k: (v if v != "conc" else "conc_ng") for k, v in _settings(
        page, **{"result-2-kind": "pass_fail", "result-3-kind": "choice"}).items()}
    preview = admin.post("/settings/queues/cfgq/", renamed)
    said = preview.content.decode()
    assert ("2 completed attempts recorded &#x27;conc&#x27;: renamed or removed, those values"
            " show apart (under \u201calso recorded\u201d) and leave its tally. To rename what"
            " people read, change its label and keep its key.") in said
    assert "&#x27;rin&#x27;" not in said.split('id="diff"')[0]  # kept keys say nothing

@pytest.mark.parametrize(("typed", "kept"), [("12,5", 12.5), ("0,25", 0.25), ("1000,5", 1000.5),
                                             ("12.5", 12.5), ("1,2500", 1.25),
                                             ("0,125", 0.125), ("12345,678", 12345.678),
                                             ("12345678901234567", 12345678901234567)])
def test_a_decimal_comma_is_read_as_the_scientist_meant_it(client, qc_line, typed, kept):
    """A number field dropped the comma of "12,5": 125 was recorded, ten times too much,
    and the completion said so as if it were right."""
    done, euid, _, _ = _completed_with(client, qc_line["worker_human"], typed)
    assert done.status_code == 302
    record = selectors.subject_history(selectors.subject_diagnostics(euid).uid)["records"][0]
    assert record["props"]["result_snapshot"]["conc"] == kept


@pytest.mark.parametrize("typed", ["1,250", "12,500"])
def test_a_comma_that_could_separate_thousands_is_asked_about_not_guessed(client, qc_line,
                                                                            typed):
    refused, _, lease, wrote = _completed_with(client, qc_line["worker_human"], typed)
    assert not wrote and refused["Location"] == f"/my-work/?item={lease}"
    point, whole = typed.replace(",", "."), typed.replace(",", "")
    assert (f"Concentration: is {typed} a decimal or thousands? Write it with a decimal point"
            f" and no separator ({point} or {whole}).") in _said(refused)
    again = client.get(refused["Location"]).content.decode()
    assert f'name="result.conc" value="{typed}"' in again  # given back as typed


def test_a_number_asked_about_is_said_with_every_other_problem_of_the_form(client, qc_line):
    """"1,250" was asked about first; the RIN out of range was said only on the next try."""
    refused, _, _, wrote = _completing(client, qc_line["worker_human"], rin="42",
                                      conc="1,250", qc="")
    assert not wrote
    assert _said(refused) == [
        "Concentration: is 1,250 a decimal or thousands? Write it with a decimal point and no"
        " separator (1.250 or 1250).", "RIN must be from 1 to 10.",
        "Record QC: this step requires it."]

def test_results_typed_for_a_claim_an_admin_ended_are_said_not_lost(client, qc_line):
    """An admin force-expired the claim while the scientist typed; Complete came back with
    the card gone, the measurements with it, and "The lease has expired" over the notice
    saying an admin had ended it."""
    sci, _, lease = _leased(client, qc_line["worker_human"])
    page = sci.get("/my-work/")
    act("expire_queue_lease", actor("admin", username="adm"), lease_euid=lease,
        payload={"reason": "bench reassigned"})
    before = counts()
    refused = sci.post(f"/leases/{lease}/complete/", form_for(
        page, f"/leases/{lease}/complete/", **{"result.rin": "8.2", "result.conc": "41",
                                                "result.qc": "pass"}))
    assert counts() == before
    told = " ".join(_said(refused))
    assert "an admin ended your claim" in told and "lease has expired" not in told
    assert ("What you typed was not recorded: RIN 8.2, Concentration 41 ng/µL, QC pass."
            in told), told


def test_results_typed_when_the_session_ended_are_said_at_sign_in(client, qc_line):
    sci, _, lease = _leased(client, qc_line["worker_human"])
    page = sci.get("/my-work/")
    data = form_for(page, f"/leases/{lease}/complete/", **{"result.rin": "8.2",
                                                           "result.qc": "pass"})
    sci.logout()
    sent = sci.post(f"/leases/{lease}/complete/", data)
    assert sent.status_code == 302 and "/accounts/login/" in sent["Location"]
    assert "The results you typed were not recorded: RIN 8.2, QC pass" in _said(sent)


@pytest.mark.parametrize("typed", ["1" * 5000, "1" + "0" * 300, "1" * 41])
def test_a_number_too_large_to_record_is_said_in_the_bench_s_words(client, qc_line, typed):
    """A 5,000-digit RIN was refused "payload.result_snapshot.rin must be a finite number",
    another "(send a larger one as text)": words of the API, at the bench."""
    refused, _, lease, wrote = _completed_with(client, qc_line["worker_human"], typed)
    assert not wrote and refused["Location"] == f"/my-work/?item={lease}"
    assert (f"Concentration: {typed[:20]}… is too large to record (numbers are below 1e40)."
            in _said(refused)), _said(refused)
