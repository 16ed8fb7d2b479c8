"""What a step records (docs/RULES.md#results): a queue declares its result fields (a
measurement, a note, a QC pass or fail); a completion is held to them whoever sends it, and
a definition the engine could not hold a completion to is refused when the queue is set up."""

from __future__ import annotations

import pytest

from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.execution.results import declared_results, described
from tests.engine import (
    SERVICE,
    SPECIMEN,
    act,
    actor,
    claim,
    counts,
    make_queue,
    make_subject,
    props,
    refused,
    register,
)

pytestmark = pytest.mark.django_db
QC_RESULTS = [
    {"key": "rin", "label": "RIN", "kind": "number", "min": 1, "max": 10, "required": True},
    {"key": "conc", "label": "Concentration", "unit": "ng/µL", "min": 0},
    {"key": "qc", "label": "QC", "kind": "pass_fail", "required": True},
    {"key": "note", "kind": "text"},
]


def _admin():
    return actor("admin", username="adm")


def _qc_queue(**extra) -> None:
    act("create_queue", _admin(), queue_key="qc", payload={
        "subject_template_codes": [SPECIMEN], "reason": "QC line",
        "result_fields": QC_RESULTS, **extra})


def _leased(queue_key: str = "qc") -> tuple:
    svc = actor(*SERVICE)
    make_subject(queue_key)
    worker = register(svc)
    lease = claim(svc, worker, queue_key)
    return svc, worker, lease


def _complete(svc, worker, lease, result: dict, **payload):
    return act("complete_queue_execution", svc, worker_euid=worker,
               lease_euid=lease["lease_euid"], expected_state="READY",
               payload={"result_snapshot": result, **payload})


def test_a_queue_keeps_its_result_fields_in_their_stored_form(tenant):
    _qc_queue()
    stored = selectors.queue_config("qc")["config"]["result_fields"]
    assert stored[1] == {"key": "conc", "label": "Concentration", "kind": "number",
                         "unit": "ng/µL", "min": 0, "required": False}
    # a label and kind left out are the key and number; required is false
    assert stored[3] == {"key": "note", "label": "note", "kind": "text", "required": False}
    assert described(stored[0]) == "RIN (rin): number from 1 to 10, required"
    assert described(stored[2]) == "QC (qc): pass or fail, required"


def test_a_completion_records_the_declared_results(tenant):
    _qc_queue()
    svc, worker, lease = _leased()
    done = _complete(svc, worker, lease, {"rin": 8.2, "conc": 41, "qc": "pass",
                                          "note": "clean peak", "run_id": "R-7"})
    record = props(done["execution_record_euid"])
    # what the queue declares and what else the worker keeps, as sent
    assert record["result_snapshot"] == {"rin": 8.2, "conc": 41, "qc": "pass",
                                         "note": "clean peak", "run_id": "R-7"}


@pytest.mark.parametrize(("result", "said"), [
    ({"qc": "pass"}, {"result_snapshot.rin": "Record RIN (rin): this step requires it."}),
    ({"rin": 8, "qc": "  "}, {"result_snapshot.qc": "Record QC (qc): this step requires it."}),
    ({"rin": 11, "qc": "pass"}, {"result_snapshot.rin": "RIN (rin) must be from 1 to 10."}),
    ({"rin": "8", "qc": "pass"}, {"result_snapshot.rin": "RIN (rin) must be a number."}),
    ({"rin": True, "qc": "pass"}, {"result_snapshot.rin": "RIN (rin) must be a number."}),
    ({"rin": 8, "qc": "PASS"}, {"result_snapshot.qc": "QC (qc) must be pass or fail."}),
    ({"rin": 8, "qc": "pass", "conc": -1},
     {"result_snapshot.conc": "Concentration (conc) must be at least 0."}),
    ({"rin": 8, "qc": "pass", "note": "two\nlines"},
     {"result_snapshot.note": "note (note) may hold only printable characters on one line"
                              " (no control or invisible characters)."}),
    ({}, {"result_snapshot.rin": "Record RIN (rin): this step requires it.",
          "result_snapshot.qc": "Record QC (qc): this step requires it."}),
])
def test_a_completion_out_of_its_queues_result_fields_is_refused(tenant, result, said):
    _qc_queue()
    svc, worker, lease = _leased()
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, result))
    assert {p["field"]: p["message"] for p in err.problems()} == said
    # the item is still the worker's to complete, and the result is not lost on retry
    assert _complete(svc, worker, lease, {"rin": 8, "qc": "fail"})["state"] == "COMPLETED"


def test_a_step_handed_to_an_external_system_leaves_its_required_results_to_the_result(
        tenant):
    _qc_queue()
    svc, worker, lease = _leased()
    subject = lease["subject_euid"]
    # dispatched: nothing required yet, but what it does record is held to its kind
    refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, {"rin": 99},
                                                  external={"run_id": "wf-1"}))
    _complete(svc, worker, lease, {}, external={"run_id": "wf-1"})

    def result(snapshot: dict):
        return act("record_external_result", svc, subject_euid=subject,
                   expected_state="WAITING_EXTERNAL",
                   payload={"outcome": "COMPLETED", "result_snapshot": snapshot})

    err = refused("VALIDATION_ERROR", lambda: result({"rin": 7}))
    assert err.details["field"] == "result_snapshot.qc"
    assert result({"rin": 7, "qc": "pass"})["state"] == "COMPLETED"


def test_a_failure_needs_no_results(tenant):
    _qc_queue()
    svc, worker, lease = _leased()
    failed = act("fail_queue_execution", svc, worker_euid=worker,
                 lease_euid=lease["lease_euid"], expected_state="READY",
                 payload={"retryable": True, "error_class": "TRANSIENT_DEPENDENCY",
                          "error_message": "bioanalyzer offline"})
    assert failed["state"] == "FAILED_RETRYABLE"


@pytest.mark.parametrize(("fields", "said"), [
    ([{"key": "RIN"}], "key must be lowercase"),
    ([{"key": "rin", "kind": "float"}], "kind must be one of number, text, pass_fail"),
    ([{"key": "rin"}, {"key": "rin", "kind": "text"}], "names rin twice"),
    ([{"key": "rin", "min": 10, "max": 1}], "min is above max"),
    ([{"key": "qc", "kind": "pass_fail", "unit": "%"}], "unit belongs to a number only"),
    ([{"key": "rin", "min": "1"}], "min must be a number"),
    ([{"key": "rin", "required": "yes"}], "required must be true or false"),
    ([{"key": "rin", "label": "R\u200bIN"}], "label may hold only printable characters"),
    ([{"key": "rin", "colour": "red"}], "unknown fields ['colour']"),
    ([{"key": "grade", "kind": "choice"}], "a choice needs them"),
    ([{"key": "grade", "choices": ["A", "B"]}], "choices belong to a choice"),
    ([{"key": "grade", "kind": "choice", "choices": ["A"]}], "choices must list 2 to 20"),
    ([{"key": "grade", "kind": "choice", "choices": ["A", "A "]}], "a choice is listed twice"),
    ([{"key": "grade", "kind": "choice", "choices": ["A", ""]}], "a choice must be text"),
    ([{"key": f"f{n}"} for n in range(21)], "a list of up to 20 fields"),
    ({"key": "rin"}, "must be a list"),
])
def test_a_result_definition_the_engine_could_not_hold_a_completion_to_is_refused(
        tenant, fields, said):
    make_queue("q1")
    act("create_queue", _admin(), queue_key="cq", payload={
        "subject_template_codes": [SPECIMEN], "reason": "r"})
    err = refused("VALIDATION_ERROR", lambda: act(
        "update_queue", _admin(), queue_key="cq", expected_revision=1,
        payload={"reason": "results", "result_fields": fields}))
    assert err.details["field"] == "result_fields" and said in err.message


def test_a_queue_another_writer_stored_unreadable_result_fields_for_holds_completions_to_none(
        tenant):
    """Bloom or a script may store anything: the engine reads what it cannot hold a result
    to as no result fields (a wrong type reads as absent), never a 500."""
    make_queue("q1", result_fields={"rin": "required"})
    assert declared_results(selectors.queue_config("q1")["config"]) == []
    svc, worker, lease = _leased("q1")
    before = counts()
    assert _complete(svc, worker, lease, {})["state"] == "COMPLETED"
    assert counts() != before


def test_result_fields_are_changed_as_any_setting_with_their_history(tenant):
    _qc_queue()
    changed = act("update_queue", _admin(), queue_key="qc", expected_revision=1, payload={
        "reason": "RIN no longer required", "result_fields": [
            {**QC_RESULTS[0], "required": False}, *QC_RESULTS[1:]]})
    assert "result_fields" in changed["changes"]
    svc, worker, lease = _leased()
    assert _complete(svc, worker, lease, {"qc": "pass"})["state"] == "COMPLETED"
    with pytest.raises(ActionError):  # still refused out of bounds
        act("update_queue", _admin(), queue_key="qc", expected_revision=2,
            payload={"reason": "r", "result_fields": [{"key": "x", "max": float("nan")}]})


def test_a_choice_records_one_of_its_values(tenant):
    act("create_queue", _admin(), queue_key="gel", payload={
        "subject_template_codes": [SPECIMEN], "reason": "gel QC", "result_fields": [
            {"key": "grade", "label": "Gel grade", "kind": "choice",
             "choices": ["A", "B", "borderline"], "required": True}]})
    stored = selectors.queue_config("gel")["config"]["result_fields"][0]
    assert described(stored) == "Gel grade (grade): one of A, B, borderline, required"
    svc, worker, lease = _leased("gel")
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, {"grade": "C"}))
    assert err.message == "Gel grade (grade) must be one of A, B, borderline."
    done = _complete(svc, worker, lease, {"grade": "borderline"})
    assert props(done["execution_record_euid"])["result_snapshot"] == {"grade": "borderline"}


def test_choices_that_differ_in_case_are_different_choices(tenant):
    """Genotypes AA, Aa and aa are three: a check of "differing only in case" refused them,
    and read back from a stored queue it left the queue declaring no result fields at all
    (required ones and bounds unchecked)."""
    act("create_queue", _admin(), queue_key="geno", payload={
        "subject_template_codes": [SPECIMEN], "reason": "genotyping",
        "result_fields": [{"key": "gt", "label": "Genotype", "kind": "choice",
                           "choices": ["AA", "Aa", "aa"], "required": True}]})
    fields = declared_results(selectors.queue_config("geno")["config"])
    assert [f["choices"] for f in fields] == [["AA", "Aa", "aa"]]
