"""Gateway benchmarks: per-completion overhead, concurrent sessions, memory per idle session.

Run from the repository root:

    python -m benchmarks.gateway.bench_gateway [--requests 400] [--sessions 50] [--turns 20]

Everything runs as a user would run it, each part in its own process: the scripted model
server (`python -m nodmix.testing.model_server --script echo`), the gateway (`nodmix gateway`,
in a fresh state directory), and this client.

1. Overhead: the same chat completion sent straight to the model server and through the
   gateway, interleaved, many times in sequence over keep-alive connections (with the CPU
   calibration measured around them, `benchmarks.report.cpu_calibration_ms`). Overhead is
   the difference of the medians (and of the 95th percentiles), plain and streamed, for a
   fresh session per request (stateless clients) and for named sessions (`user`) of ten
   turns each (a chat client, whose history the gateway replays to the model).
2. Concurrency: 50 sessions x 20 turns at once. Each reply must echo that session's own
   message, and afterwards each session's transcript must hold exactly its own 20 prompts.
3. Memory: the gateway's resident memory before and after opening N sessions (one short turn
   each, so each transcript is loaded and cached), divided by N.

Prints a markdown table and writes `benchmarks/results/gateway.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from tests.support.process import rss_kb

from benchmarks.report import cpu_calibration_ms, quantile, write_results
from nodmix.gateway.client import GatewayClient
from nodmix.gateway.server import STOP_HINT

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "gateway.json"
TOKEN = "bench-token"
STATE_ROOT: str | None = None
"""Where the gateway's state directories go (`--state-root`; default: the system temp dir)."""
TARGET_OVERHEAD_P50_MS = 5.0
TARGET_MEMORY_PER_SESSION_KB = 200.0


def _read_line(proc: subprocess.Popen[str], want: str, timeout: float = 30.0) -> list[str]:
    """Lines of `proc`'s stdout up to the one containing `want`."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"process exited early: {''.join(lines)}")
        lines.append(line.rstrip("\n"))
        if want in line:
            return lines
    raise SystemExit(f"timed out waiting for {want!r}")


@contextmanager
def model_server() -> Iterator[str]:
    """The scripted `echo` model server in its own process; yields its OpenAI base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodmix.testing.model_server", "--script", "echo"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = _read_line(proc, "listening on")[-1]
        yield line.split("listening on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait()


@contextmanager
def gateway(model_url: str) -> Iterator[tuple[str, int]]:
    """`nodmix gateway` in a fresh state dir, its default model the scripted server."""
    with tempfile.TemporaryDirectory(prefix="nodmix-bench-", dir=STATE_ROOT) as state:
        env = _write_state(Path(state), model_url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "nodmix", "gateway", "--port", "0", "--token", TOKEN],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            lines = _read_line(proc, STOP_HINT)
            url = next(line for line in lines if "listening on" in line).split("listening on ")[1]
            yield url.strip(), proc.pid
        finally:
            proc.terminate()
            proc.wait()


def _write_state(state: Path, model_url: str) -> dict[str, str]:
    """A config whose default model is the scripted server; returns the environment to use."""
    config = state / "nodmix.json"
    config.write_text(
        json.dumps(
            {
                "models": {
                    "providers": {
                        "local": {
                            "api": "openai-completions",
                            "baseUrl": model_url,
                            "apiKey": "bench",
                            "models": [{"id": "scripted", "contextWindow": 1_000_000}],
                        }
                    }
                },
                "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
            }
        ),
        encoding="utf-8",
    )
    return {**os.environ, "NODMIX_STATE_DIR": str(state), "NODMIX_CONFIG_PATH": str(config)}


def _cpu_s(pid: int) -> float:
    """User plus system CPU seconds the process has used (Linux `/proc/<pid>/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- 1. overhead --------------------------------------------------------------------------------


def _complete(
    client: httpx2.Client, url: str, body: dict[str, Any], headers: dict[str, str]
) -> float:
    start = time.perf_counter()
    if body.get("stream"):
        with client.stream("POST", url, json=body, headers=headers) as response:
            for _ in response.iter_bytes():
                pass
            status = response.status_code
    else:
        response = client.post(url, json=body, headers=headers)
        status = response.status_code
    elapsed = (time.perf_counter() - start) * 1000
    if status != 200:
        raise SystemExit(f"{url} answered {status}")
    return elapsed


def overhead(model_url: str, gateway_url: str, pid: int, requests: int) -> list[dict[str, Any]]:
    """Interleaved direct and gateway completions; one row per variant.

    Each row also has the gateway process's CPU time per completion, which, unlike wall
    time, does not move when other processes compete for the CPU or the disk is slow.
    """
    rows = []
    auth = {"authorization": f"Bearer {TOKEN}"}
    variants = [
        ("plain, fresh session per request", False, False),
        ("streamed, fresh session per request", True, False),
        ("plain, named sessions of 10 turns", False, True),
    ]
    with httpx2.Client(timeout=30) as client:
        for label, stream, named in variants:
            message = {"role": "user", "content": "What is the capital of France?"}
            direct_body: dict[str, Any] = {"model": "scripted", "messages": [message]}
            via_body: dict[str, Any] = {"model": "nodmix", "messages": [message]}
            if stream:
                direct_body["stream"] = via_body["stream"] = True
            direct, via = [], []
            cpu_start = 0.0
            for index in range(requests + 30):
                if index == 30:
                    cpu_start = _cpu_s(pid)
                if named:  # a chat client: the same session for a while, then a new one
                    via_body["user"] = f"{label[:5]}-{index // 10}"
                d = _complete(client, f"{model_url}/chat/completions", direct_body, {})
                g = _complete(client, f"{gateway_url}/v1/chat/completions", via_body, auth)
                if index >= 30:  # warm-up: connections, imports, caches
                    direct.append(d)
                    via.append(g)
            rows.append(
                {
                    "variant": label,
                    "requests": requests,
                    "direct_p50_ms": round(statistics.median(direct), 3),
                    "gateway_p50_ms": round(statistics.median(via), 3),
                    "overhead_p50_ms": round(statistics.median(via) - statistics.median(direct), 3),
                    "overhead_p95_ms": round(quantile(via, 0.95) - quantile(direct, 0.95), 3),
                    "gateway_cpu_ms_per_request": round(
                        (_cpu_s(pid) - cpu_start) * 1000 / requests, 3
                    ),
                }
            )
    return rows


async def runtime_only(model_url: str, requests: int) -> dict[str, Any]:
    """The same turns through `Runtime.run_turn` in this process: the runtime's share."""
    from nodmix.config.loader import load_config
    from nodmix.runtime import Runtime

    with tempfile.TemporaryDirectory(prefix="nodmix-bench-", dir=STATE_ROOT) as state:
        env = _write_state(Path(state), model_url)
        direct, turns = [], []
        body = {"model": "scripted", "messages": [{"role": "user", "content": "x"}]}
        async with (
            Runtime.open(load_config(env=env), env=env) as runtime,
            httpx2.AsyncClient(timeout=30) as client,
        ):
            for index in range(requests + 30):
                start = time.perf_counter()
                await client.post(f"{model_url}/chat/completions", json=body)
                middle = time.perf_counter()
                await runtime.run_turn("What is the capital of France?", session_key=f"rt-{index}")
                end = time.perf_counter()
                if index >= 30:
                    direct.append((middle - start) * 1000)
                    turns.append((end - middle) * 1000)
    return {
        "requests": requests,
        "direct_p50_ms": round(statistics.median(direct), 3),
        "run_turn_p50_ms": round(statistics.median(turns), 3),
        "overhead_p50_ms": round(statistics.median(turns) - statistics.median(direct), 3),
    }


# ---- 2. concurrency -----------------------------------------------------------------------------


async def echo_completion(
    client: httpx2.AsyncClient,
    url: str,
    body: dict[str, Any],
    label: str,
    latencies: list[float],
    errors: list[str],
) -> None:
    """Post one completion to a gateway whose model echoes: its latency (ms) goes to
    `latencies`; a failure, or a reply other than the last message, to `errors` under `label`."""
    text = body["messages"][-1]["content"]
    start = time.perf_counter()
    try:
        response = await client.post(f"{url}/v1/chat/completions", json=body)
    except httpx2.HTTPError as exc:
        errors.append(f"{label}: {type(exc).__name__}: {exc}")
        return
    latencies.append((time.perf_counter() - start) * 1000)
    if response.status_code != 200:
        errors.append(f"{label}: HTTP {response.status_code} {response.text[:200]}")
    elif response.json()["choices"][0]["message"]["content"] != text:
        errors.append(f"{label}: reply leaked or wrong: {response.text[:200]}")


async def concurrency(gateway_url: str, sessions: int, turns: int) -> dict[str, Any]:
    """Many sessions at once; every reply and every transcript must be that session's own."""
    run = uuid.uuid4().hex[:8]
    errors: list[str] = []
    latencies: list[float] = []
    limits = httpx2.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    headers = {"authorization": f"Bearer {TOKEN}"}

    async with httpx2.AsyncClient(timeout=60, limits=limits, headers=headers) as client:

        async def session(index: int) -> None:
            user = f"conc-{run}-{index}"
            for turn in range(turns):
                text = f"session {index} turn {turn} {uuid.uuid4().hex[:6]}"
                body = {
                    "model": "nodmix",
                    "user": user,
                    "messages": [{"role": "user", "content": text}],
                }
                await echo_completion(client, gateway_url, body, user, latencies, errors)

        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for index in range(sessions):
                group.start_soon(session, index)
        wall = time.perf_counter() - start

    leaks = 0
    async with GatewayClient.connect(gateway_url, token=TOKEN) as ws:
        for index in range(sessions):
            key = f"conc-{run}-{index}"
            history = await ws.request("sessions.history", {"sessionKey": key})
            prompts = [
                e["message"]["content"][0]["text"]
                for e in history["entries"]
                if e["type"] == "message" and e["message"]["role"] == "user"
            ]
            own = [p for p in prompts if p.startswith(f"session {index} turn ")]
            if len(own) != turns or len(prompts) != turns:
                leaks += 1
                errors.append(f"{key}: transcript holds {len(prompts)} prompts, {len(own)} its own")
    return {
        "sessions": sessions,
        "turns_per_session": turns,
        "completions": len(latencies),
        "errors": len(errors),
        "sessions_with_foreign_or_missing_messages": leaks,
        "wall_s": round(wall, 2),
        "completions_per_s": round(len(latencies) / wall, 1),
        "latency_p50_ms": round(statistics.median(latencies), 2) if latencies else None,
        "latency_p95_ms": round(quantile(latencies, 0.95), 2) if latencies else None,
        "first_errors": errors[:5],
    }


# ---- 3. memory ----------------------------------------------------------------------------------


def memory(gateway_url: str, pid: int, sessions: int) -> dict[str, Any]:
    """Resident memory added per idle session (one short turn each, then idle)."""
    headers = {"authorization": f"Bearer {TOKEN}"}
    with httpx2.Client(timeout=30, headers=headers) as client:

        def turn(user: str) -> None:
            body = {
                "model": "nodmix",
                "user": user,
                "messages": [{"role": "user", "content": "hi"}],
            }
            response = client.post(f"{gateway_url}/v1/chat/completions", json=body)
            if response.status_code != 200:
                raise SystemExit(f"memory run failed: {response.text[:200]}")

        for index in range(50):  # warm every code path and allocator arena first
            turn(f"mem-warm-{index}")
        before = rss_kb(pid)
        for index in range(sessions):
            turn(f"mem-{index}")
        after = rss_kb(pid)
    per_session = (after - before) / sessions
    return {
        "sessions": sessions,
        "rss_before_kb": before,
        "rss_after_kb": after,
        "per_session_kb": round(per_session, 1),
    }


# ---- report -------------------------------------------------------------------------------------


def _table(report: dict[str, Any]) -> str:
    lines = [
        "| measurement | result | target |",
        "|---|---:|---:|",
    ]
    calibration = report["calibration_ms"]
    lines.extend(
        f"| overhead p50 / p95, {row['variant']} (direct p50 {row['direct_p50_ms']} ms; "
        f"gateway CPU {row['gateway_cpu_ms_per_request']} ms/request; "
        f"calibration {calibration:.0f} ms) "
        f"| {row['overhead_p50_ms']} / {row['overhead_p95_ms']} ms "
        f"| p50 ≤ {TARGET_OVERHEAD_P50_MS} ms |"
        for row in report["overhead"]
    )
    r = report["runtime_only"]
    lines.append(
        f"| of which the runtime (`Runtime.run_turn` in process, fresh sessions), p50 "
        f"| {r['overhead_p50_ms']} ms | - |"
    )
    c = report["concurrency"]
    lines.append(
        f"| {c['sessions']} sessions × {c['turns_per_session']} turns: errors / leaking sessions "
        f"| {c['errors']} / {c['sessions_with_foreign_or_missing_messages']} | 0 / 0 |"
    )
    lines.append(
        f"| concurrent throughput, latency p50 / p95 | {c['completions_per_s']}/s, "
        f"{c['latency_p50_ms']} / {c['latency_p95_ms']} ms | - |"
    )
    m = report["memory"]
    lines.append(
        f"| resident memory per idle session ({m['sessions']} sessions) "
        f"| {m['per_session_kb']} KB | ≤ {TARGET_MEMORY_PER_SESSION_KB:g} KB |"
    )
    return "\n".join(lines)


def main() -> None:
    """Run the benchmarks, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requests", type=int, default=400, help="sequential completions per variant"
    )
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--memory-sessions", type=int, default=1000)
    parser.add_argument(
        "--state-root",
        help="directory for the state dirs (e.g. /dev/shm to take disk sync costs out)",
    )
    args = parser.parse_args()
    global STATE_ROOT
    STATE_ROOT = args.state_root
    with model_server() as model_url, gateway(model_url) as (gateway_url, pid):
        before = cpu_calibration_ms()
        report: dict[str, Any] = {
            "benchmark": "gateway",
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "state_root": args.state_root or tempfile.gettempdir(),
            "overhead": overhead(model_url, gateway_url, pid, args.requests),
        }
        report["calibration_ms"] = round(statistics.mean((before, cpu_calibration_ms())), 1)
        report["runtime_only"] = anyio.run(runtime_only, model_url, args.requests)
    with model_server() as model_url, gateway(model_url) as (gateway_url, pid):
        report["concurrency"] = anyio.run(concurrency, gateway_url, args.sessions, args.turns)
    with model_server() as model_url, gateway(model_url) as (gateway_url, pid):
        report["memory"] = memory(gateway_url, pid, args.memory_sessions)
    print(_table(report))
    write_results(RESULTS, report)
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
