"""Gateway resources over many sessions: open files (sockets apart) and resident memory.

Run from the repository root:

    python -m benchmarks.gateway.bench_open_files [--sessions 10000] [--concurrency 16]

The scripted `echo` model server and `nodmix gateway` run in their own processes, as a user
runs them. The client sends one turn to each of N named sessions (distinct `user` fields,
`--concurrency` at a time) and reads the gateway's `/proc/<pid>/fd` and `VmRSS` before (after
a warm-up) and after. Open files must not grow with the number of sessions: transcripts borrow
append descriptors from a small pool, and lock files are open only during a turn.

Prints a markdown table and writes `benchmarks/results/open_files.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import Any

import anyio
from tests.support.chat_load import one_turn_per_session
from tests.support.process import open_files as count_open_files
from tests.support.process import rss_kb

from benchmarks.gateway.bench_gateway import TOKEN, gateway, model_server
from benchmarks.report import write_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "open_files.json"
TARGET_FILES = 64


def open_files(pid: int) -> dict[str, int]:
    """The process's descriptors: sockets, and everything else (files, pipes, epoll...)."""
    files, sockets = count_open_files(pid)
    return {"files": files, "sockets": sockets}


async def run_sessions(url: str, first: int, count: int, concurrency: int) -> list[str]:
    """One turn on each of `count` named sessions; returns the errors."""
    sessions = range(first, first + count)
    return await one_turn_per_session(
        url, TOKEN, sessions, user_prefix="files", concurrency=concurrency
    )


def measure(sessions: int, concurrency: int) -> dict[str, Any]:
    """Open files and RSS of a fresh gateway before and after `sessions` sessions."""
    with model_server() as model_url, gateway(model_url) as (url, pid):
        warm = 100
        errors = anyio.run(run_sessions, url, 0, warm, concurrency)
        before = {**open_files(pid), "rss_kb": rss_kb(pid)}
        start = time.perf_counter()
        errors += anyio.run(run_sessions, url, warm, sessions, concurrency)
        wall = time.perf_counter() - start
        after = {**open_files(pid), "rss_kb": rss_kb(pid)}
    return {
        "sessions": sessions,
        "concurrency": concurrency,
        "errors": len(errors),
        "first_errors": errors[:5],
        "before": before,
        "after": after,
        "wall_s": round(wall, 1),
        "sessions_per_s": round(sessions / wall, 1),
    }


def _table(report: dict[str, Any]) -> str:
    before, after = report["before"], report["after"]
    n = f"{report['sessions']:,}"
    return "\n".join(
        [
            "| measurement | result | target |",
            "|---|---:|---:|",
            f"| open files beyond sockets, after 100 / after {n} more sessions "
            f"| {before['files']} / {after['files']} | ≤ {TARGET_FILES} |",
            f"| sockets at the end (client connections, model pool, listener) "
            f"| {after['sockets']} | - |",
            f"| resident memory after 100 / after {n} more sessions "
            f"| {before['rss_kb'] / 1024:.1f} / {after['rss_kb'] / 1024:.1f} MB | - |",
            f"| errors over {n} sessions ({report['concurrency']} at a time, "
            f"{report['sessions_per_s']}/s) | {report['errors']} | 0 |",
        ]
    )


def main() -> None:
    """Run the measurement, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    report = {
        "benchmark": "open_files",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        **measure(args.sessions, args.concurrency),
    }
    print(_table(report))
    write_results(RESULTS, report)
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    if report["errors"] or report["after"]["files"] > TARGET_FILES:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
