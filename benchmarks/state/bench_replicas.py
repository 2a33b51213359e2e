"""Gateway replicas on PostgreSQL: turns/s through one, two and three replicas, the per-turn
cost of the database backend against files, and how long a singleton takes to fail over.

Run from the repository root (a real PostgreSQL from Debian is started in a temp dir, with
PostgreSQL's default durability settings; `scripts/ensure-postgres.sh` installs it):

    python -m benchmarks.state.bench_replicas [--turns 600] [--concurrency 16]

The model is the scripted `echo` server in its own process. Every gateway is a real
`nodmix gateway` process; the client spreads turns round-robin over the replicas, each turn
continuing one of 64 sessions (so replicas keep reading what the others appended).

Prints markdown tables and writes `benchmarks/results/state_replicas.json`.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
from tests.gateway.support import TOKEN, GatewayProcess
from tests.support.config import scripted_config
from tests.support.postgres import PostgresServer

from benchmarks.gateway.bench_gateway import model_server
from benchmarks.report import cpu_calibration_ms, quantile, write_results
from benchmarks.state import turn_costs

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "state_replicas.json"
SESSIONS = 64


def _state(root: Path, name: str, model_url: str, db_url: str | None, lease: float) -> Path:
    state = root / name
    state.mkdir(parents=True)
    top: dict[str, Any] = {"gateway": {"auth": {"token": TOKEN}}}
    if db_url is not None:
        top["state"] = {"backend": "postgres", "postgres": {"url": db_url, "leaseSeconds": lease}}
    config = scripted_config(model_url, **top)
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    return state


@contextmanager
def _gateways(states: list[Path]) -> Iterator[list[GatewayProcess]]:
    started: list[GatewayProcess] = []
    try:
        for state in states:
            started.append(GatewayProcess(state).start())  # noqa: PERF401 (one after another)
        yield started
    finally:
        for gateway in started:
            if gateway.proc is not None and gateway.proc.poll() is None:
                gateway.stop()
            gateway.__exit__(None, None, None)


async def _drive(urls: list[str], turns: int, concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    headers = {"authorization": f"Bearer {TOKEN}"}
    queue = iter(range(turns))
    limits = httpx2.Limits(max_connections=concurrency * 2)
    async with httpx2.AsyncClient(timeout=60, headers=headers, limits=limits) as client:

        async def worker() -> None:
            for i in queue:
                text = f"turn {i}"
                started = time.perf_counter()
                try:
                    response = await client.post(
                        f"{urls[i % len(urls)]}/v1/chat/completions",
                        headers={"x-nodmix-session-key": f"s{i % SESSIONS}"},
                        json={"model": "nodmix", "messages": [{"role": "user", "content": text}]},
                    )
                except httpx2.HTTPError as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                if response.status_code != 200:
                    errors.append(f"HTTP {response.status_code}: {response.text[:120]}")
                    continue
                latencies.append((time.perf_counter() - started) * 1000)

        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(worker)
        wall = time.perf_counter() - start
    return {
        "turns": turns,
        "errors": len(errors),
        "first_errors": errors[:3],
        "turns_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p99_ms": round(quantile(latencies, 0.99), 1) if latencies else None,
    }


def _sequential(url: str, turns: int) -> float:
    """Median latency of one turn at a time (ms)."""
    samples = []
    with httpx2.Client(timeout=60, headers={"authorization": f"Bearer {TOKEN}"}) as client:
        for i in range(turns):
            started = time.perf_counter()
            response = client.post(
                f"{url}/v1/chat/completions",
                headers={"x-nodmix-session-key": f"q{i % 8}"},
                json={"model": "nodmix", "messages": [{"role": "user", "content": f"q{i}"}]},
            )
            response.raise_for_status()
            if i >= 10:  # warm-up excluded
                samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _storage_turns(root: Path, db_url: str, turns: int) -> dict[str, list[float]]:
    """In process, the storage work of one turn (lock, open, two appends, usage, end), in ms
    per step, median over `turns`, for files and for PostgreSQL."""
    from nodmix.messages import AssistantMessage, TextBlock, Usage, user_message
    from nodmix.sessions.manager import SessionManager
    from nodmix.state.postgres.backend import PostgresState
    from nodmix.state.settings import StateSettings

    pg = PostgresState.open(StateSettings(backend="postgres", url=db_url), root / "s", role="b")
    managers = {
        "files": SessionManager(root / "storage-files"),
        "postgres": SessionManager(root / "s", backend=pg.sessions()),
    }

    async def turn(manager: SessionManager, key: str) -> list[float]:
        marks = [time.perf_counter()]
        async with manager.hold_turn(key, timeout=10):
            marks.append(time.perf_counter())
            session = manager.open(key)
            marks.append(time.perf_counter())
            session.append_message(user_message("hello"))
            session.append_message(AssistantMessage(content=(TextBlock(text="hi"),)))
            marks.append(time.perf_counter())
            session.update_usage(Usage(input=3, output=2))
            manager.flush_due()
            marks.append(time.perf_counter())
        marks.append(time.perf_counter())
        return [(b - a) * 1000 for a, b in zip(marks, marks[1:], strict=False)]

    async def run() -> dict[str, list[float]]:
        out = {}
        for name, manager in managers.items():
            rows = [await turn(manager, f"s{i % 8}") for i in range(turns + 20)][20:]
            steps = [statistics.median(column) for column in zip(*rows, strict=True)]
            out[name] = [round(v, 3) for v in [*steps, statistics.median(map(sum, rows))]]
        return out

    try:
        return anyio.run(run)
    finally:
        for manager in managers.values():
            manager.close()
        pg.close()


def _holder(db_url: str, name: str) -> str | None:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT holder FROM nodmix_leases WHERE name = %s AND expires_at > now()", (name,)
        ).fetchone()
    return str(row[0]) if row else None


def _failover(root: Path, model_url: str, server: PostgresServer, lease: float) -> float:
    db = server.fresh_database()
    states = [_state(root, f"f{lease}-{i}", model_url, db, lease) for i in range(2)]
    with _gateways(states) as gateways:
        deadline = time.monotonic() + 30
        while (holder := _holder(db, "cron")) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("no replica took the cron lease")
            time.sleep(0.05)
        pid = int(holder.split(":")[1])
        victim = next(g for g in gateways if g.proc is not None and g.proc.pid == pid)
        assert victim.proc is not None
        killed = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        while (now_holder := _holder(db, "cron")) in (None, holder):
            if time.monotonic() - killed > lease * 3 + 10:
                raise RuntimeError("no failover")
            time.sleep(0.02)
        assert now_holder != holder
        return time.monotonic() - killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sequential", type=int, default=110)
    args = parser.parse_args()
    calibration = cpu_calibration_ms()
    report: dict[str, Any] = {"calibration_ms": round(calibration)}
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nodmix-bench-")))
        model_url = stack.enter_context(model_server())
        server = PostgresServer(fast=False).start()
        stack.callback(server.close)

        report["storage_turn_ms"] = _storage_turns(root, server.fresh_database(), 300)
        report["loop_per_turn"] = {
            "files": turn_costs.measure(None, root / "probe-files"),
            "postgres": turn_costs.measure(server.fresh_database(), root / "probe-pg"),
        }
        files = _state(root, "files", model_url, None, 15)
        with _gateways([files]) as (gateway,):
            report["sequential_files_ms"] = round(_sequential(gateway.url, args.sequential), 2)
        pg = _state(root, "pg", model_url, server.fresh_database(), 15)
        with _gateways([pg]) as (gateway,):
            report["sequential_postgres_ms"] = round(_sequential(gateway.url, args.sequential), 2)

        for count in (1, 2, 3):
            db = server.fresh_database()
            states = [_state(root, f"r{count}-{i}", model_url, db, 15) for i in range(count)]
            with _gateways(states) as gateways:
                result = anyio.run(_drive, [g.url for g in gateways], args.turns, args.concurrency)
            report[f"replicas_{count}"] = result
        files_states = [_state(root, "files-load", model_url, None, 15)]
        with _gateways(files_states) as gateways:
            report["files_1"] = anyio.run(_drive, [gateways[0].url], args.turns, args.concurrency)

        report["failover_s"] = {
            str(lease): round(_failover(root, model_url, server, lease), 2) for lease in (15, 3)
        }
    write_results(RESULTS, report)
    _print(report, args)


def _print(report: dict[str, Any], args: argparse.Namespace) -> None:
    files, pg = report["sequential_files_ms"], report["sequential_postgres_ms"]
    print(
        f"CPU calibration {report['calibration_ms']} ms; {args.turns} turns, "
        f"{args.concurrency} in flight, {SESSIONS} sessions\n"
    )
    print("| setup | turns/s | p50 / p99 latency | errors |")
    print("|---|---:|---|---:|")
    rows = [("files, 1 gateway", report["files_1"])]
    rows += [
        (f"postgres, {n} replica{'s' if n > 1 else ''}", report[f"replicas_{n}"]) for n in (1, 2, 3)
    ]
    for name, r in rows:
        print(f"| {name} | {r['turns_per_s']} | {r['p50_ms']} / {r['p99_ms']} ms | {r['errors']} |")
    print()
    print("| benchmark | result |")
    print("|---|---|")
    print(
        f"| one turn at a time, median (files / postgres) | {files} / {pg} ms "
        f"(the database adds {pg - files:.2f} ms a turn) |"
    )
    steps = "lock / open / 2 appends / usage / end"
    for backend, values in report["storage_turn_ms"].items():
        *parts, total = values
        shown = " / ".join(f"{v:g}" for v in parts)
        print(f"| storage work of one turn, {backend} ({steps}), median | {total:g} ms ({shown}) |")
    for backend, costs in report["loop_per_turn"].items():
        print(
            f"| event loop per turn, {backend}: waiting on the database / blocked at all, median "
            f"| {costs.get('loop_db_wait_ms', 0):g} / {costs['loop_blocked_ms']:g} ms "
            f"({costs['statements_on_loop']:g} statements on the loop, "
            f"{costs['statements_elsewhere']:g} in threads; turn {costs['turn_ms']:g} ms) |"
        )
    for lease, seconds in report["failover_s"].items():
        print(f"| singleton failover after `kill -9`, leaseSeconds {lease} | {seconds} s |")


if __name__ == "__main__":
    main()
