"""Queues as configuration code: `manage.py apply_queues FILE` plans, prints and applies
through the queue actions; `--check` exits non-zero while the database differs; a second
apply changes nothing (docs/RULES.md#queue-configuration)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bloomops.demo.data import QUEUE_FILE
from bloomops.execution import selectors
from tests.engine import counts, make_queue

pytestmark = pytest.mark.django_db

FILE = """
reason = "lab configuration v1"

[[queue]]
queue_key = "extract"
display_name = "Extraction"
subject_template_codes = ["content/material/specimen/1.0"]
lease_ttl_seconds = 900
[queue.retry_policy]
initial_delay_seconds = 60

[[queue]]
queue_key = "qc"
subject_template_codes = ["content/material/extracted_sample/1.0"]
enabled = false
disabled_reason = "not commissioned yet"
"""


def run(path, *args) -> str:
    out = io.StringIO()
    call_command("apply_queues", str(path), *args, stdout=out)
    return out.getvalue()


def check(path) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("apply_queues", str(path), "--check", stdout=out)
    except SystemExit as exc:
        assert "The database differs from the file" in out.getvalue()
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "queues.toml"
    path.write_text(FILE)
    return path


def cfg(key):
    return selectors.queue_config(key)["config"]


def test_plan_apply_and_apply_again_changes_nothing(tenant, conf):
    code, out = check(conf)
    assert code == 1
    assert "create_queue      extract: new queue" in out and "set_queue_enabled qc" in out
    assert selectors.queues() == []  # --check writes nothing
    out = run(conf)
    assert "Applied 3 change(s)." in out
    assert cfg("extract")["display_name"] == "Extraction"
    assert cfg("extract")["managed_by"] == "bloomops"
    assert cfg("qc")["enabled"] is False
    assert cfg("qc")["disabled_reason"] == "not commissioned yet"
    history = selectors.queue_history("extract")
    assert history[0].executed_by == "apply_queues"
    assert history[0].reason == "lab configuration v1"
    before = counts()
    assert "No changes" in run(conf) and "Nothing to apply." in run(conf)
    assert counts() == before
    assert check(conf)[0] == 0


def test_a_changed_file_plans_updates_replacements_and_enabling(tenant, conf):
    run(conf)
    conf.write_text(FILE.replace("lease_ttl_seconds = 900", "lease_ttl_seconds = 1200")
                    .replace('"content/material/extracted_sample/1.0"]',
                             '"content/material/extracted_sample/1.0",'
                             ' "content/material/library/1.0"]')
                    .replace("enabled = false", "enabled = true"))
    code, out = check(conf)
    assert code == 1
    assert "update_queue      extract: lease_ttl_seconds 900 -> 1200" in out
    assert "replace_queue     qc" in out and "set_queue_enabled qc: enabled" in out
    run(conf)
    assert cfg("extract")["lease_ttl_seconds"] == 1200 and cfg("extract")["revision"] == 2
    qc = cfg("qc")
    assert qc["enabled"] is True and qc["replaces_euid"]
    assert qc["subject_template_codes"][-1] == "content/material/library/1.0"
    assert check(conf)[0] == 0


def test_another_systems_queue_is_not_changed(tenant, conf):
    make_queue("extract", lease_ttl_seconds=60,
               subject_template_codes=["content/material/specimen/1.0"])
    code, out = check(conf)
    assert code == 1 and "cannot change" in out and "extract: managed by another" in out
    before = counts()
    with pytest.raises(CommandError):
        run(conf)
    assert counts() == before


@pytest.mark.parametrize(("text", "message"), [
    ("[[queue]]\nqueue_key = 'x'\ncolour = 'red'\n"
     "subject_template_codes = ['content/material/specimen/1.0']", "unknown fields"),
    ("[[queue]]\nqueue_key = 'x'\nsubject_template_codes = ['nope/1.0']", "no template"),
    ("[[queue]]\nqueue_key = 'x'\nlease_ttl_seconds = 1\n"
     "subject_template_codes = ['content/material/specimen/1.0']", "lease_ttl_seconds"),
    ("queue = 'x'", "queues are [[queue]] tables"),
    ("[[queue", "Expected"),
])
def test_a_bad_file_is_refused_with_where_and_writes_nothing(tenant, tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    before = counts()
    with pytest.raises(CommandError) as err:
        run(path)
    assert message in str(err.value)
    assert counts() == before


def test_the_demo_file_applies_cleanly_and_is_idempotent(tenant):
    run(QUEUE_FILE)
    assert check(QUEUE_FILE)[0] == 0
    assert all(cfg(q["queue_key"])["managed_by"] == "bloomops" for q in selectors.queues())


@pytest.mark.parametrize("line", ['reason = "   "', ""], ids=["blank", "absent"])
def test_a_file_without_a_reason_states_where_the_change_came_from(tenant, tmp_path, line):
    path = tmp_path / "lab.toml"
    path.write_text(FILE.replace('reason = "lab configuration v1"', line))
    run(path)
    assert selectors.queue_history("extract")[0].reason == "apply_queues lab.toml"


def test_every_mistake_of_a_file_is_said_in_one_run(tenant, tmp_path):
    """A file with five mistakes took five runs to learn them, one at a time."""
    path = tmp_path / "mistakes.toml"
    path.write_text("""
[[queue]]
queue_key = "lib_prep"
subject_template_codes = ["content/material/specimen/1.0"]
lease_ttl_seconds = 10
required_worker_capabilities = "wetlab.prep"
straggler_threshold_seconds = -5

[[queue]]
queue_key = "Lib_QC"
subject_template_codes = ["content/material/specimen/1.0"]
""")
    before = counts()
    with pytest.raises(CommandError) as err:
        run(path)
    said = str(err.value)
    for field in ("[lease_ttl_seconds]", "[required_worker_capabilities]",
                  "[straggler_threshold_seconds]", "queue #2 (Lib_QC)"):
        assert field in said, said
    assert counts() == before


def test_misspelt_keys_of_the_file_and_every_value_are_said_in_the_same_run(tenant, tmp_path):
    """A misspelt reason or a [[queues]] table was dropped without a word (the queues it held
    never made); a misspelt field hid the file's bad values until the next run."""
    path = tmp_path / "typos.toml"
    path.write_text("""
reasn = "our lab v1"

[[queue]]
queue_key = "dna_qc"
subject_template_codes = ["content/material/specimen/1.0"]
result_field = []
[queue.retry_policy]
backof_factor = 2.0

[[queue]]
queue_key = "dna_extraction"

[[queue]]
queue_key = ["a", "list"]
subject_template_codes = ["content/material/specimen/1.0"]

[[queues]]
queue_key = "never_made"
subject_template_codes = ["content/material/specimen/1.0"]
""")
    before = counts()
    with pytest.raises(CommandError) as err:
        run(path)
    said = str(err.value)
    for words in ("unknown key 'reasn'", "unknown table 'queues'",
                  "queue #1: unknown fields ['result_field']", "backof_factor",
                  "queue #2 (dna_extraction): subject_template_codes is required",
                  "queue #3 (['a', 'list']): queue_key must be text"):
        assert words in said, said
    assert counts() == before


def test_short_template_names_and_a_next_queue_nobody_made(tenant, tmp_path):
    """The intake took "specimen"; apply_queues and the settings refused it. A next queue
    that exists nowhere was taken without a word, and the flow then went nowhere."""
    path = tmp_path / "short.toml"
    path.write_text("""
[[queue]]
queue_key = "extract"
subject_template_codes = ["specimen"]
default_next_queue_key = "sequencng"
""")
    out = run(path)
    assert "warning           extract: No queue sequencng exists yet" in out
    assert cfg("extract")["subject_template_codes"] == ["content/material/specimen/1.0"]
    assert check(path)[0] == 0  # the short name plans no change once applied


def test_the_same_templates_in_another_order_are_no_change(tenant, conf):
    """A file listing a queue's templates in another order planned a replacement, which
    the engine refused as changing nothing, and every other change of the file failed."""
    two = ('"content/material/extracted_sample/1.0", "content/material/library/1.0"]')
    conf.write_text(FILE.replace('"content/material/extracted_sample/1.0"]', two))
    run(conf)
    conf.write_text(FILE.replace('"content/material/extracted_sample/1.0"]',
                                 '"content/material/library/1.0",'
                                 ' "content/material/extracted_sample/1.0"]'))
    assert check(conf)[0] == 0
    assert "Nothing to apply." in run(conf)


def test_a_file_that_does_not_say_enabled_leaves_a_disabled_queue_disabled(tenant, conf):
    """An admin disabled a queue for maintenance on its page; the next run of a file that
    does not mention `enabled` turned it on again and dropped the admin's reason."""
    from tests.engine import act, actor

    run(conf)
    act("set_queue_enabled", actor("admin"), queue_key="extract",
        expected_revision=cfg("extract")["revision"],
        payload={"enabled": False, "reason": "cluster maintenance until Friday"})
    conf.write_text(FILE.replace("lease_ttl_seconds = 900", "lease_ttl_seconds = 1200"))
    code, out = check(conf)
    assert code == 1 and "update_queue      extract: lease_ttl_seconds 900 -> 1200" in out
    assert "set_queue_enabled extract" not in out
    run(conf)
    extract = cfg("extract")
    assert extract["enabled"] is False and extract["lease_ttl_seconds"] == 1200
    assert extract["disabled_reason"] == "cluster maintenance until Friday"
    # a file that says so still turns it on
    conf.write_text(FILE.replace("lease_ttl_seconds = 900",
                                 "lease_ttl_seconds = 1200\nenabled = true"))
    assert "set_queue_enabled extract: enabled" in check(conf)[1]


def test_a_file_that_leaves_a_queue_to_nobody_is_warned_of_as_the_preview_does(tenant, conf):
    """The settings preview warns when a change of capabilities leaves nobody able to serve
    the queue; apply_queues planned "lab.qc" -> "lab.qcc" without a word."""
    from tests.engine import SERVICE, actor, register

    served = FILE.replace('lease_ttl_seconds = 900',
                          'lease_ttl_seconds = 900\nrequired_worker_capabilities = ["lab.qc"]')
    conf.write_text(served)
    run(conf)
    register(actor(*SERVICE), capabilities=["lab.qc"])
    conf.write_text(served.replace('"lab.qc"', '"lab.qcc"'))
    code, out = check(conf)
    assert code == 1
    assert "warning           extract: With these settings nobody can serve extract" in out
    assert "(1 can now)" in out
    conf.write_text(served.replace("lease_ttl_seconds = 900", "lease_ttl_seconds = 1000"))
    assert "nobody can serve" not in check(conf)[1]  # what it asks of workers is unchanged
    # a replacement (its templates changed too) is warned of as well
    conf.write_text(served.replace('"lab.qc"', '"lab.qcc"').replace(
        'subject_template_codes = ["content/material/specimen/1.0"]',
        'subject_template_codes = ["content/material/specimen/1.0",'
        ' "content/material/library/1.0"]', 1))
    out = check(conf)[1]
    assert "replace_queue     extract" in out and "nobody can serve extract" in out, out


@pytest.mark.parametrize(("text", "said"), [
    (b"\xff\xfereason = 'x'\n", "not UTF-8 text"),
    (b"queue = [1, 2]\n", "queues are [[queue]] tables, one per queue (found queue = [1, 2])"),
    (b"[queue]\nqueue_key = 'a'\n", "(found one [queue] table)"),
    (b"reason = 'x'\n", "(found none)"),
    (b"[[queue]]\nqueue_key = 'deep'\ndisplay_name = " + b"[" * 300 + b"]" * 300 + b"\n",
     "nests"),
    (b"reason = " + b"{a = " * 400 + b"1" + b"}" * 400 + b"\n", "nest too deeply to read"),
])
def test_a_file_no_queue_can_be_read_from_is_refused_in_words(tenant, tmp_path, text, said):
    """Each of these ended in a Python traceback (or said only "no [[queue]] tables")."""
    path = tmp_path / "hostile.toml"
    path.write_bytes(text)
    before = counts()
    with pytest.raises(CommandError) as err:
        run(path)
    assert said in str(err.value), str(err.value)
    assert counts() == before


def test_a_retry_policy_s_every_mistake_and_a_disabled_reason_are_said_in_one_run(
        tenant, tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text("""
[[queue]]
queue_key = "q"
subject_template_codes = ["content/material/specimen/1.0"]
enabled = false
disabled_reason = 5
[queue.retry_policy]
mode = 5
initial_delay_seconds = -1
backof_factor = 2.0
""")
    with pytest.raises(CommandError) as err:
        run(path)
    said = str(err.value)
    for words in ("unknown fields ['backof_factor']", "retry_policy.mode must be",
                  "retry_policy.initial_delay_seconds must be a number",
                  "disabled_reason must be text"):
        assert words in said, said


def test_a_new_queue_is_judged_as_it_will_be_made_and_an_open_one_is_said(tenant, tmp_path):
    """Every new queue of a file was warned of as offering items in no state (judged without
    the settings it starts with); a queue asking for no capability, open to the lab's every
    robot, was not warned of at all."""
    path = tmp_path / "lab.toml"
    path.write_text("""
[[queue]]
queue_key = "receipt"
subject_template_codes = ["specimen"]
required_worker_capabilities = ["lab.receipt"]

[[queue]]
queue_key = "anyone"
subject_template_codes = ["specimen"]

[[queue]]
queue_key = "people"
subject_template_codes = ["specimen"]
manual_only = true
""")
    out = check(path)[1]
    warnings = [line for line in out.splitlines() if line.startswith("warning")]
    assert warnings == ["warning           anyone: It asks for no capability and is not"
                        " manual-only: every worker may take its items, service and"
                        " instrument workers included (one without a handler for its step"
                        " gives the item back and stops). Name the capabilities its work"
                        " needs (required_worker_capabilities), or make it manual_only for"
                        " people."], out
    assert "READY is not among" not in out
    run(path)
    assert not [line for line in check(path)[1].splitlines() if line.startswith("warning")]
