"""MCP benchmarks: the first tool call of a fresh manager (server spawn included), then warm calls.

Run from the repository root (server-everything needs `npm ci` first):

    python -m benchmarks.mcp.bench_mcp [--cold-runs 5] [--warm-calls 100]

For each server, "cold" opens a new `MCPManager` and times what a run does first: list the tools
(spawn + handshake + tools/list), then call one; for the HTTP row the server is already running,
so "cold" is connect + handshake. "Warm" is the per-call latency on the live connection.
Prints a markdown table and writes `benchmarks/results/mcp.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from benchmarks.report import quantile, write_results
from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "mcp.json"
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"


async def _cold(server: MCPServerConfig, tool: str, args: dict[str, Any]) -> tuple[float, float]:
    """Milliseconds to list tools in a fresh manager, and to the end of the first call."""
    start = time.perf_counter()
    async with MCPManager({"bench": server}) as manager:
        tools = await manager.list_tools()
        listed = time.perf_counter()
        if not tools:
            raise SystemExit(f"server failed: {manager.failures}")
        result = await manager.call_tool("bench", tool, args)
        called = time.perf_counter()
    if result.is_error:
        raise SystemExit(f"call failed: {result.text_content}")
    return (listed - start) * 1000, (called - start) * 1000


async def _warm(server: MCPServerConfig, tool: str, args: dict[str, Any], n: int) -> list[float]:
    async with MCPManager({"bench": server}) as manager:
        await manager.list_tools()
        for _ in range(5):  # let both sides reach a steady state
            await manager.call_tool("bench", tool, args)
        out: list[float] = []
        for _ in range(n):
            start = time.perf_counter()
            result = await manager.call_tool("bench", tool, args)
            out.append((time.perf_counter() - start) * 1000)
            if result.is_error:
                raise SystemExit(f"call failed: {result.text_content}")
    return out


async def _measure(
    label: str,
    server: MCPServerConfig,
    tool: str,
    args: dict[str, Any],
    *,
    cold_runs: int,
    warm_calls: int,
) -> dict[str, Any]:
    cold = [await _cold(server, tool, args) for _ in range(cold_runs)] if cold_runs else []
    warm = await _warm(server, tool, args, warm_calls)
    row: dict[str, Any] = {"server": label, "tool": tool, "warm_calls": len(warm)}
    if cold:
        row["cold_list_ms_median"] = round(statistics.median(c[0] for c in cold), 1)
        row["cold_first_call_ms_median"] = round(statistics.median(c[1] for c in cold), 1)
        row["cold_first_call_ms_max"] = round(max(c[1] for c in cold), 1)
        row["cold_runs"] = len(cold)
    row["warm_call_ms_median"] = round(statistics.median(warm), 3)
    row["warm_call_ms_p90"] = round(quantile(warm, 0.9), 3)
    return row


@contextmanager
def _http_everything() -> Iterator[str]:
    """server-everything over streamable HTTP on a free local port (started outside timing)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("server-everything (HTTP) did not start") from None
                time.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


async def run(cold_runs: int, warm_calls: int) -> list[dict[str, Any]]:
    """Measure every server and return one row per server."""
    if not EVERYTHING.exists():
        raise SystemExit(f"{EVERYTHING} is missing: run `npm ci` in {ROOT}")
    time_server = MCPServerConfig(command=sys.executable, args=["-m", "mcp_server_time"])
    stdio = MCPServerConfig(command=str(EVERYTHING), args=["stdio"])
    rows = [
        await _measure(
            "mcp-server-time (stdio)",
            time_server,
            "get_current_time",
            {"timezone": "Europe/Paris"},
            cold_runs=cold_runs,
            warm_calls=warm_calls,
        ),
        await _measure(
            "server-everything (stdio)",
            stdio,
            "echo",
            {"message": "hello"},
            cold_runs=cold_runs,
            warm_calls=warm_calls,
        ),
    ]
    with _http_everything() as url:
        rows.append(
            await _measure(
                "server-everything (streamable HTTP)",
                MCPServerConfig(url=url),
                "echo",
                {"message": "hello"},
                cold_runs=cold_runs,
                warm_calls=warm_calls,
            )
        )
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| server | tool | cold: spawn + list (ms) | cold: first call done (ms) "
        "| warm call median (ms) | warm p90 (ms) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {r['server']} | {r['tool']} | {r.get('cold_list_ms_median', '-')} "
        f"| {r.get('cold_first_call_ms_median', '-')} | {r['warm_call_ms_median']} "
        f"| {r['warm_call_ms_p90']} |"
        for r in rows
    )
    return "\n".join(lines)


def main() -> None:
    """Run the benchmark, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--warm-calls", type=int, default=100)
    args = parser.parse_args()
    rows = anyio.run(run, args.cold_runs, args.warm_calls)
    print(_table(rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "mcp",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cold_runs": args.cold_runs,
        "warm_calls": args.warm_calls,
        "rows": rows,
    }
    write_results(RESULTS, report)
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
