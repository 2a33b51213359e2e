"""Memory search benchmarks: indexing 10,000 notes, re-indexing one change, search latency,
and recall@5 of questions in other words, keyword-only and hybrid.

Run from the repository root:

    python -m benchmarks.memory.bench_memory [--notes 10000] [--questions 200]

Prints a markdown table and writes `benchmarks/results/memory.json`. Notes are generated
(`benchmarks/memory/corpus.py`) into a temporary directory; hybrid search takes its vectors from
the scripted model server's deterministic `/v1/embeddings` (a test double with a synonym table,
over a real local socket), so recall@5 hybrid measures the ranking pipeline, not a real model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.memory.corpus import Question, generate
from benchmarks.report import cpu_calibration_ms
from nodmix.config.schema import MemoryConfig, MemoryEmbeddingsConfig
from nodmix.memory.index import MemoryIndex
from nodmix.memory.service import open_index
from nodmix.memory.settings import resolve_memory_settings
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer

RESULTS = Path(__file__).resolve().parent.parent / "results" / "memory.json"

TARGET_INDEX_S = 10.0
TARGET_REINDEX_MS = 50.0
TARGET_OUTSIDE_EDIT_MS = 20.0
TARGET_SEARCH_MS = 10.0
SEARCHES = 300


def _open(state: Path, workspace: Path, embeddings_url: str | None = None) -> MemoryIndex:
    embeddings = (
        MemoryEmbeddingsConfig(base_url=embeddings_url, model="scripted", batch_size=256)
        if embeddings_url
        else None
    )
    settings = resolve_memory_settings(MemoryConfig(embeddings=embeddings))
    return open_index(settings, state_dir=state, agent_id="main", workspace=workspace)


def _recall(index: MemoryIndex, questions: list[Question], k: int = 5) -> dict[str, float]:
    """Share of questions whose note is in the top `k`, overall and per kind of question."""
    found: dict[str, list[bool]] = {"all": [], "reworded": [], "paraphrased": []}
    for q in questions:
        hits = index.query(q.text, max_results=k, min_score=0.0)
        hit = any(h.path == q.path for h in hits)
        found["all"].append(hit)
        found[q.kind].append(hit)
    return {kind: sum(v) / len(v) for kind, v in found.items() if v}


def _recall_text(recall: dict[str, float]) -> str:
    return (
        f"{recall['all']:.2f} (reworded {recall['reworded']:.2f}, "
        f"paraphrased {recall['paraphrased']:.2f})"
    )


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered) * 1000,
        "p90": ordered[int(len(ordered) * 0.9)] * 1000,
        "p99": ordered[int(len(ordered) * 0.99)] * 1000,
    }


def _search_latency(index: MemoryIndex, questions: list[Question]) -> dict[str, float]:
    """`search()` as `memory_search` runs it: freshness check, then the query."""
    samples = []
    for n in range(SEARCHES):
        q = questions[n % len(questions)]
        start = time.perf_counter()
        index.search(q.text)
        samples.append(time.perf_counter() - start)
    return _ms(samples)


def _reindex_one(index: MemoryIndex, workspace: Path, rel: str) -> dict[str, float]:
    """Change one note, then bring the index up to date: as the next search does (inotify
    events, an outside edit), by a full mtime scan (no inotify, or the periodic safety net),
    and by the known path (Nodmix's own write/edit)."""
    path = workspace / rel
    original = path.read_text(encoding="utf-8")
    watched, scans, known = [], [], []
    for n in range(9):
        path.write_text(original + f"Edited outside ({n}).\n", encoding="utf-8")
        start = time.perf_counter()
        report = index.refresh()
        watched.append(time.perf_counter() - start)
        assert report is not None and report.indexed == 1, report
        path.write_text(original + f"Edited again ({n}).\n", encoding="utf-8")
        start = time.perf_counter()
        report = index.sync()
        scans.append(time.perf_counter() - start)
        assert report.indexed == 1, report
        path.write_text(original + f"Edited once more ({n}).\n", encoding="utf-8")
        start = time.perf_counter()
        report = index.sync_paths([rel])
        known.append(time.perf_counter() - start)
        assert report.indexed == 1, report
    return {
        "watched_ms": statistics.median(watched) * 1000,
        "full_scan_ms": statistics.median(scans) * 1000,
        "known_path_ms": statistics.median(known) * 1000,
    }


def run(notes: int, questions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nodmix-bench-memory-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        asked = generate(workspace, notes=notes, questions=questions)
        size = sum(p.stat().st_size for p in (workspace / "memory").rglob("*.md"))
        keyword = _open(root / "kw", workspace)
        start = time.perf_counter()
        report = keyword.sync()
        index_s = time.perf_counter() - start
        chunks = keyword.status()["chunks"]
        watching = keyword.watching
        reindex = _reindex_one(keyword, workspace, asked[0].path)
        keyword.sync()
        query_only = []
        for n in range(SEARCHES):
            start = time.perf_counter()
            keyword.query(asked[n % len(asked)].text)
            query_only.append(time.perf_counter() - start)
        search = _search_latency(keyword, asked)
        recall_kw = _recall(keyword, asked)
        db_bytes = os.path.getsize(keyword.store.path)
        keyword.close()
        with ScriptedModelServer(lambda request: ModelReply.text("unused")) as server:
            hybrid = _open(root / "hy", workspace, server.base_url)
            start = time.perf_counter()
            hybrid.sync()
            hybrid_index_s = time.perf_counter() - start
            hybrid_search = _search_latency(hybrid, asked)
            recall_hy = _recall(hybrid, asked)
            hybrid.close()
    return {
        "notes": notes,
        "bytes": size,
        "chunks": chunks,
        "indexed": report.indexed,
        "index_s": index_s,
        "db_bytes": db_bytes,
        "reindex": reindex,
        "watching": watching,
        "query_only_ms": _ms(query_only),
        "search_ms": search,
        "recall5_keyword": recall_kw,
        "questions": len(asked),
        "hybrid_index_s": hybrid_index_s,
        "hybrid_search_ms": hybrid_search,
        "recall5_hybrid": recall_hy,
    }


def _yes(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "no")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=200)
    args = parser.parse_args()
    before = cpu_calibration_ms()
    r = run(args.notes, args.questions)
    r["calibration_ms"] = [before, cpu_calibration_ms()]
    n = f"{r['notes']:,} notes"
    rows = [
        (
            f"index {n} ({r['bytes'] / 1e6:.1f} MB, {r['chunks']:,} chunks), keyword-only",
            f"{r['index_s']:.2f} s (index file {r['db_bytes'] / 1e6:.1f} MB)",
            f"≤ {TARGET_INDEX_S:.0f} s",
            r["index_s"] <= TARGET_INDEX_S,
        ),
        (
            "re-index after one note changes outside Nodmix: the next search's check "
            + ("(inotify events)" if r["watching"] else "(NO inotify: a full scan)"),
            f"{r['reindex']['watched_ms']:.1f} ms",
            f"≤ {TARGET_OUTSIDE_EDIT_MS:.0f} ms",
            r["reindex"]["watched_ms"] <= TARGET_OUTSIDE_EDIT_MS,
        ),
        (
            "re-index after one note changes: full mtime scan (no inotify; safety net)",
            f"{r['reindex']['full_scan_ms']:.1f} ms",
            f"≤ {TARGET_REINDEX_MS:.0f} ms",
            r["reindex"]["full_scan_ms"] <= TARGET_REINDEX_MS,
        ),
        (
            "re-index after one note changes: path known (Nodmix's write/edit)",
            f"{r['reindex']['known_path_ms']:.1f} ms",
            f"≤ {TARGET_REINDEX_MS:.0f} ms",
            r["reindex"]["known_path_ms"] <= TARGET_REINDEX_MS,
        ),
        (
            f"`memory_search` keyword-only at {n} (freshness check + query)",
            f"p50 {r['search_ms']['p50']:.2f} ms (p90 {r['search_ms']['p90']:.2f}, "
            f"p99 {r['search_ms']['p99']:.1f})",
            f"p50 ≤ {TARGET_SEARCH_MS:.0f} ms",
            r["search_ms"]["p50"] <= TARGET_SEARCH_MS,
        ),
        (
            "…the query alone",
            f"p50 {r['query_only_ms']['p50']:.2f} ms (p99 {r['query_only_ms']['p99']:.2f})",
            "-",
            None,
        ),
        (
            f"recall@5, {r['questions']} questions in other words, keyword-only",
            _recall_text(r["recall5_keyword"]),
            "reported",
            None,
        ),
        (
            "recall@5, same questions, hybrid (scripted embeddings)",
            _recall_text(r["recall5_hybrid"]),
            "reported",
            None,
        ),
        (
            f"index {n} hybrid (embedding every chunk over HTTP)",
            f"{r['hybrid_index_s']:.2f} s",
            "-",
            None,
        ),
        (
            f"`memory_search` hybrid at {n} (query embedded over HTTP)",
            f"p50 {r['hybrid_search_ms']['p50']:.2f} ms (p99 {r['hybrid_search_ms']['p99']:.1f})",
            "-",
            None,
        ),
    ]
    rows.append(
        (
            "CPU calibration before / after (quiet machine: ~120 ms)",
            f"{r['calibration_ms'][0]:.0f} / {r['calibration_ms'][1]:.0f} ms",
            "-",
            None,
        )
    )
    print("| benchmark | result | target | ok |")
    print("|---|---|---|---|")
    for name, result, target, ok in rows:
        print(f"| {name} | {result} | {target} | {_yes(ok)} |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(r, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
