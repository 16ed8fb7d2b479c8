"""`make bench`'s figures (docs/BENCHMARK.md): the summaries and their floors are taken in
turns, each ratio is the median of the round-by-round ratios, and the floor is the cheaper
of the planner's read and the read in page order."""

from __future__ import annotations

import re

import pytest

from bloomops.bench.figures import FLOOR, _in_page_order, _ratio, cheaper, paired
from bloomops.tapdb.db import fetch_all, fetch_value
from bloomops.tapdb.tenancy import tenant_of
from tests.engine import make_queue, make_subject

pytestmark = pytest.mark.django_db


def test_the_measured_take_turns_after_a_warm_up_round():
    calls: list[str] = []
    samples = paired({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3)
    assert calls == ["a", "b"] * 4
    assert [len(v) for v in samples.values()] == [3, 3]
    assert all(wall >= 0 for wall, _ in samples["a"])


def test_a_ratio_is_the_median_of_the_rounds_ratios():
    samples = {"a": [(10.0, 20.0), (40.0, None), (9.0, 30.0)],
               "b": [(5.0, 10.0), (10.0, 10.0), (3.0, 0.0)]}
    assert _ratio(samples, "a", "b", 0) == 3.0  # 2, 4, 3
    assert _ratio(samples, "a", "b", 1) == 2.0  # the one round with both CPU figures
    assert _ratio({"a": [(1.0, None)], "b": [(1.0, None)]}, "a", "b", 1) is None


def test_the_floor_is_the_cheaper_read_round_by_round():
    planned = [(180.0, 170.0), (120.0, None), (175.0, 180.0)]
    pages = [(130.0, 130.0), (140.0, 140.0), (178.0, None)]
    assert cheaper(planned, pages) == [(130.0, 130.0), (120.0, 140.0), (175.0, 180.0)]


def test_the_page_order_read_uses_no_index_scan_and_leaves_the_setting_as_it_was():
    make_queue("q1")
    for i in range(3):
        make_subject("q1", name=f"s{i}")
    tenant = {"tenant": tenant_of(None)}
    plan = "\n".join(r["QUERY PLAN"] for r in _in_page_order("EXPLAIN " + FLOOR, tenant))
    assert "generic_instance" in plan
    assert not re.search(r"(^|->)\s*Index (Only )?Scan", plan, re.MULTILINE), plan
    assert fetch_value("SHOW enable_indexscan") == "on"
    assert _in_page_order(FLOOR, tenant) == fetch_all(FLOOR, tenant) == [{"count": 3}]
