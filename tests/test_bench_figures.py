"""`make bench`'s figures (docs/BENCHMARK.md): the summaries and their floors are taken in
turns, and each ratio is the median of the round-by-round ratios."""

from __future__ import annotations

import pytest

from bloomops.bench.figures import _ratio, paired

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
