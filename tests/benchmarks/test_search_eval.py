"""The search evaluation computes its metrics correctly and its labels are sound."""

from __future__ import annotations

import pytest
from benchmarks.value.search_eval import evaluate, load_queries, run


def test_metrics_from_known_ranks() -> None:
    ranked = {
        "first": ["a", "b", "c"],
        "second": ["b", "a"],
        "fifth": ["x", "y", "z", "w", "a"],
        "sixth": ["1", "2", "3", "4", "5", "a"],
        "absent": ["b"],
    }
    queries = [{"query": q, "expected": "a"} for q in ranked]
    result = evaluate(lambda q: ranked[q], queries)
    assert result["queries"] == 5
    assert result["recall_at_1"] == pytest.approx(1 / 5)
    assert result["recall_at_5"] == pytest.approx(3 / 5)
    assert result["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 5 + 1 / 6 + 0) / 5)
    assert [m["query"] for m in result["misses_at_5"]] == ["sixth", "absent"]
    assert result["misses_at_5"][1]["rank"] is None


def test_labelled_queries_are_sound() -> None:
    splits = load_queries()
    tuning, heldout = splits["tuning"], splits["heldout"]
    assert len(tuning) >= 100 and len(heldout) >= 40
    texts = [q["query"].lower() for q in tuning + heldout]
    assert len(texts) == len(set(texts))  # no query appears twice, nor in both splits
    # Natural language, not tool names reworded: few queries contain every word of their label.
    spelled = [
        q
        for q in tuning + heldout
        if all(w in q["query"].lower() for w in q["expected"].split("_"))
    ]
    assert len(spelled) <= 0.05 * len(texts), spelled


def test_evaluation_over_the_benchmark_catalog() -> None:
    result = run()  # also checks that every label names a searchable tool
    assert result["searchable_tools"] == 485
    for split in result["splits"].values():
        ours, baseline = split["nodmix"], split["substring"]
        assert ours["recall_at_5"] > baseline["recall_at_5"]
        assert ours["mrr"] > baseline["mrr"]
