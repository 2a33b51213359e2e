"""Gateway under load: many concurrent completions, with and without stalled clients.

Run from the repository root:

    python -m benchmarks.gateway.bench_load [--requests 1000] [--concurrency 200] [--stalled 100]

The scripted model server (`python -m nodmix.testing.model_server --script echo`) and the
gateway (`nodmix gateway`, fresh state directory, default limits) each run in their own
process. The client sends `--requests` chat completions (a fresh session each, as a stateless
OpenAI client does) with `--concurrency` in flight at once, and checks that every answer is a
200 that echoes its own prompt. The second run repeats it while `--stalled` sockets are open
to the gateway sending nothing (slow or stuck clients), which must neither fail requests nor
slow them much.

Prints a markdown table and writes `benchmarks/results/gateway_load.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx2

from benchmarks.gateway.bench_gateway import TOKEN, echo_completion, gateway, model_server
from benchmarks.report import quantile, write_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "gateway_load.json"


async def load(url: str, requests: int, concurrency: int) -> dict[str, Any]:
    """`requests` completions, `concurrency` at a time; latencies and errors."""
    latencies: list[float] = []
    errors: list[str] = []
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"authorization": f"Bearer {TOKEN}"}
    queue = iter(range(requests))

    async with httpx2.AsyncClient(timeout=60, limits=limits, headers=headers) as client:

        async def worker() -> None:
            for index in queue:
                text = f"load {index} {uuid.uuid4().hex[:8]}"
                body = {"model": "nodmix", "messages": [{"role": "user", "content": text}]}
                await echo_completion(client, url, body, str(index), latencies, errors)

        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(worker)
        wall = time.perf_counter() - start
    return {
        "requests": requests,
        "concurrency": concurrency,
        "errors": len(errors),
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(latencies) / wall, 1),
        "latency_p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "latency_p99_ms": round(quantile(latencies, 0.99), 1) if latencies else None,
        "first_errors": errors[:5],
    }


def _stalled_sockets(url: str, count: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]


def _table(report: dict[str, Any]) -> str:
    lines = [
        "| run | requests × concurrency | errors | latency p50 / p99 | throughput |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, row in report["runs"].items():
        lines.append(
            f"| {label} | {row['requests']} × {row['concurrency']} | {row['errors']} "
            f"| {row['latency_p50_ms']} / {row['latency_p99_ms']} ms "
            f"| {row['requests_per_s']}/s |"
        )
    return "\n".join(lines)


def main() -> None:
    """Run both load rounds, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--stalled", type=int, default=100)
    args = parser.parse_args()
    runs: dict[str, Any] = {}
    with model_server() as model_url, gateway(model_url) as (url, _pid):
        anyio.run(load, url, 50, 10)  # warm-up: imports, caches, connections
        runs["plain"] = anyio.run(load, url, args.requests, args.concurrency)
        stalled = _stalled_sockets(url, args.stalled)
        try:
            runs[f"with {args.stalled} stalled sockets open"] = anyio.run(
                load, url, args.requests, args.concurrency
            )
        finally:
            for sock in stalled:
                sock.close()
    report = {
        "benchmark": "gateway_load",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "runs": runs,
    }
    print(_table(report))
    failed = [label for label, row in runs.items() if row["errors"]]
    for label in failed:
        print(f"\n{label}: first errors: {runs[label]['first_errors']}")
    write_results(RESULTS, report)
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
