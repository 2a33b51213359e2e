"""What the benchmarks share: the markdown results table, quantiles and the CPU calibration."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Row = tuple[str, str, str, bool | None]


def print_table(rows: Iterable[Row]) -> None:
    """Print `| benchmark | result | target | ok |` rows; `ok` None (no target) shows `-`."""
    print("| benchmark | result | target | ok |")
    print("|---|---|---|---|")
    for name, value, target, ok in rows:
        mark = "-" if ok is None else ("yes" if ok else "NO")
        print(f"| {name} | {value} | {target} | {mark} |")


def quantile(values: list[float], q: float) -> float:
    """The value at fraction `q` of the sorted values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cpu_calibration_ms() -> float:
    """Milliseconds for a fixed pure-Python loop (3M iterations, median of 5): about 120 ms
    when the machine is quiet, so a loaded run can be told from a slow change."""
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        total = 0
        for i in range(3_000_000):
            total += i
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def write_results(path: Path, document: Any) -> None:
    """Write a benchmark's results as indented JSON, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
