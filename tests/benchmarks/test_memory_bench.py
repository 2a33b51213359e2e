"""The memory benchmark's corpus and pipeline, on a small generated set (no timings asserted)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.memory.bench_memory import run
from benchmarks.memory.corpus import generate


def test_the_corpus_is_deterministic_and_each_question_points_at_a_note(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", notes=300, questions=20)
    second = generate(tmp_path / "b", notes=300, questions=20)
    assert first == second
    assert {q.kind for q in first} == {"reworded", "paraphrased"}
    for q in first:
        name = " ".join(q.text.rstrip("?").split()[-2:])
        assert f"with {name}." in (tmp_path / "a" / q.path).read_text()


def test_a_small_run_indexes_every_note_and_reports_recall_for_both_modes() -> None:
    result = run(notes=300, questions=20)
    assert result["indexed"] == result["notes"] == 300
    assert result["chunks"] >= 300
    for mode in ("recall5_keyword", "recall5_hybrid"):
        assert set(result[mode]) == {"all", "reworded", "paraphrased"}
        assert all(0.0 <= v <= 1.0 for v in result[mode].values())
    # Vectors find paraphrases that share no topic word; keywords mostly cannot.
    assert result["recall5_hybrid"]["paraphrased"] > result["recall5_keyword"]["paraphrased"]
