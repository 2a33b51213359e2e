"""`tools.search` quality over the 500-tool catalog: recall@1, recall@5 and MRR of Nodmix's
ranking (`RunCatalog.search`) and of a plain substring-count baseline
(`nodmix.catalog.substring_rank`), on labelled natural-language queries.

The queries are in `benchmarks/fixtures/search_queries.json`: a tuning split (written first and
looked at while improving the ranking) and a held-out split (written afterwards, never used to
tune), reported separately. Guests search only non-MCP entries, so both rankers see those.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.value.catalog import FIXTURES, catalog_tools
from nodmix.catalog import RunCatalog, substring_rank

QUERIES = FIXTURES / "search_queries.json"
TARGET_RECALL_AT_5 = 0.9
Ranker = Callable[[str], list[str]]


def load_queries(path: Path = QUERIES) -> dict[str, list[dict[str, str]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {"tuning": data["tuning"], "heldout": data["heldout"]}


def rankers(catalog: RunCatalog) -> dict[str, Ranker]:
    """Tool names ranked best first, by each method."""
    entries = [(e.id, e.name, e.id, e.label, e.description) for e in catalog.visible]
    names = {e.id: e.name for e in catalog.visible}
    size = len(entries)
    return {
        "nodmix": lambda q: [e.name for e in catalog.search(q, size)],
        "substring": lambda q: [names[k] for k in substring_rank(entries, q)],
    }


def evaluate(rank: Ranker, queries: Sequence[dict[str, str]]) -> dict[str, Any]:
    """recall@1, recall@5 and MRR (reciprocal rank, 0 when not ranked at all)."""
    hits1 = hits5 = 0
    reciprocal = 0.0
    misses = []
    for item in queries:
        ranked = rank(item["query"])
        position = ranked.index(item["expected"]) + 1 if item["expected"] in ranked else 0
        hits1 += position == 1
        hits5 += 1 <= position <= 5
        reciprocal += 1 / position if position else 0.0
        if not 1 <= position <= 5:
            misses.append({**item, "rank": position or None, "top": ranked[:3]})
    n = len(queries) or 1
    return {
        "queries": len(queries),
        "recall_at_1": hits1 / n,
        "recall_at_5": hits5 / n,
        "mrr": reciprocal / n,
        "misses_at_5": misses,
    }


def run() -> dict[str, Any]:
    catalog = RunCatalog.build(catalog_tools(500))
    splits = load_queries()
    known = {e.name for e in catalog.visible}
    for split in splits.values():
        unknown = [q["expected"] for q in split if q["expected"] not in known]
        if unknown:
            raise ValueError(f"labels name tools that are not searchable: {unknown}")
    methods = rankers(catalog)
    results = {
        split: {name: evaluate(rank, queries) for name, rank in methods.items()}
        for split, queries in splits.items()
        if queries
    }
    nodmix = [r["nodmix"] for r in results.values()]
    targets = {
        "recall_at_5_ge_0_9": all(r["recall_at_5"] >= TARGET_RECALL_AT_5 for r in nodmix),
        "ahead_of_substring": all(
            r["nodmix"]["recall_at_5"] > r["substring"]["recall_at_5"]
            and r["nodmix"]["mrr"] > r["substring"]["mrr"]
            for r in results.values()
        ),
    }
    return {"searchable_tools": len(catalog.visible), "splits": results, "targets": targets}


def table(result: dict[str, Any]) -> list[str]:
    out = [
        "| queries | ranking | recall@1 | recall@5 | MRR |",
        "|---|---|---:|---:|---:|",
    ]
    labels = {"nodmix": "Nodmix (BM25F)", "substring": "substring count (reference)"}
    for split, methods in result["splits"].items():
        for name, r in methods.items():
            out.append(
                f"| {split} ({r['queries']}) | {labels[name]} | {r['recall_at_1']:.3f} "
                f"| {r['recall_at_5']:.3f} | {r['mrr']:.3f} |"
            )
    return out
