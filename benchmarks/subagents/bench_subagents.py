"""Subagents: what a waited-for spawn adds to the subagent's own turn, and how one code-mode
program fans out to 20 subagents (real runtime, real scripted model server over HTTP, real
files in a temp state directory).

Run from the repository root:

    python -m benchmarks.subagents.bench_subagents [--pairs 200]

- Spawn overhead: `sessions_spawn` with `wait: true` (limits, the child's session and its
  index entry, the context engine's hooks, the run record, the slot, usage counted to the
  requester) against the same task run as a plain turn in a fresh session, alternating, so
  the model round trip and the turn itself cancel out; the median difference is what the
  subagent machinery costs.
- Fan-out: one `exec` program spawns 20 subagents with `Promise.all` and `wait: true`; each
  child's model takes 250 ms. The turn's wall time (after a warm-up turn that boots the
  code-mode cell) is compared with the slowest child (from its run record), with the default
  limits (`maxConcurrent` 8: three waves) and with `maxConcurrent` and code mode's
  `maxPendingToolCalls` at 20 (one wave). The model server shares the process and its event
  loop, as the children's turns do.

Prints a markdown table and writes `benchmarks/results/subagents.json`.
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

import anyio
from tests.support.config import scripted_config

from benchmarks.report import cpu_calibration_ms, print_table, quantile, write_results
from nodmix.config.loader import load_config
from nodmix.providers.retry import RetryPolicy
from nodmix.runtime import Runtime
from nodmix.subagents.planning import SpawnRequest
from nodmix.subagents.store import open_subagent_store
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from nodmix.tools.base import ToolContext

RESULTS = Path(__file__).resolve().parent.parent / "results" / "subagents.json"
TARGETS = {"overhead_ms": 5.0}
CHILD_SECONDS = 0.25


def _write_config(state: Path, base_url: str, pending: int = 16, **subagents: Any) -> None:
    code_mode = {"enabled": True, "maxPendingToolCalls": pending}
    config = scripted_config(base_url, tools={"codeMode": code_mode})
    config["agents"]["defaults"]["subagents"] = {"maxChildrenPerTurn": 1024, **subagents}
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def _open(state: Path) -> Any:
    env = {**os.environ, "NODMIX_STATE_DIR": str(state)}
    loaded = load_config(state / "nodmix.json", env=env)
    return Runtime.open(loaded, env=env, retry=RetryPolicy(attempts=1))


def _ctx(run_id: str) -> ToolContext:
    return ToolContext(
        agent_id="main",
        session_key="agent:main:main",
        session_id="bench",
        run_id=run_id,
        call_id="call",
        workspace=Path("."),
    )


async def _overhead(base_url: str, pairs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        _write_config(state, base_url)
        async with _open(state) as runtime:
            runtime.sessions.open("agent:main:main")
            spawned: list[float] = []
            plain: list[float] = []
            for i in range(pairs + 10):
                start = time.perf_counter()
                result = await runtime.subagents.spawn(
                    SpawnRequest(task=f"task {i}", wait=True), _ctx(f"run_{i}")
                )
                middle = time.perf_counter()
                await runtime.run_turn(f"task {i}", session_key=f"plain-{i}")
                end = time.perf_counter()
                assert result["status"] == "completed", result
                if i >= 10:  # warm-up
                    spawned.append((middle - start) * 1000)
                    plain.append((end - middle) * 1000)
    differences = [s - p for s, p in zip(spawned, plain, strict=True)]
    return {
        "spawn_ms": statistics.median(spawned),
        "plain_ms": statistics.median(plain),
        "overhead_ms": statistics.median(differences),
        "overhead_p90_ms": quantile(differences, 0.9),
    }


async def _fanout(base_url: str, max_concurrent: int, pending: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        _write_config(state, base_url, pending, maxConcurrent=max_concurrent)
        async with _open(state) as runtime:
            await runtime.run_turn("fanout 2", session_key="warm-up")  # boots the cell template
            start = time.perf_counter()
            outcome = await runtime.run_turn(f"fanout 20 sleep {CHILD_SECONDS}")
            wall = time.perf_counter() - start
            values = json.loads(outcome.result.reply)
            assert len(values) == 20 and all("=completed:" in v for v in values), values
            with anyio.fail_after(10):
                while len(runs := open_subagent_store(state).all()) < 22 or any(
                    r.is_open for r in runs
                ):
                    await anyio.sleep(0.01)
            runs = [r for r in runs if r.parent_key == "agent:main:main"]
    slowest = max((r.ended_at or 0) - (r.started_at or 0) for r in runs)
    return {"wall_ms": wall * 1000, "slowest_child_ms": slowest * 1000}


async def _run(pairs: int) -> dict[str, Any]:
    async with ScriptedModelServer(respond) as server:
        overhead = await _overhead(server.base_url, pairs)
        waves = await _fanout(server.base_url, 8, 16)
        at_once = await _fanout(server.base_url, 20, 20)
    return {"overhead": overhead, "fanout_8": waves, "fanout_20": at_once}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    calibration = cpu_calibration_ms()
    r = anyio.run(_run, args.pairs)
    o, w8, w20 = r["overhead"], r["fanout_8"], r["fanout_20"]
    rows = [
        (
            "`sessions_spawn` with `wait: true` over the same task as a plain turn (median)",
            f"{o['overhead_ms']:.2f} ms (p90 {o['overhead_p90_ms']:.2f}; spawn "
            f"{o['spawn_ms']:.1f} ms, plain turn {o['plain_ms']:.1f} ms; calibration "
            f"{calibration:.0f} ms)",
            "≤ 5 ms",
            o["overhead_ms"] <= TARGETS["overhead_ms"],
        ),
        (
            "20 subagents from one code-mode program, `maxConcurrent` 8 (3 waves), "
            f"each child's model {CHILD_SECONDS * 1000:.0f} ms",
            f"{w8['wall_ms']:.0f} ms wall, slowest child {w8['slowest_child_ms']:.0f} ms",
            "-",
            None,
        ),
        (
            "the same with `maxConcurrent` 20 and code mode's `maxPendingToolCalls` 20 (one wave)",
            f"{w20['wall_ms']:.0f} ms wall, slowest child {w20['slowest_child_ms']:.0f} ms "
            f"(+{w20['wall_ms'] - w20['slowest_child_ms']:.0f} ms)",
            "-",
            None,
        ),
    ]
    print_table(rows)
    write_results(
        args.output,
        {
            "benchmark": "subagents",
            "results": r,
            "targets": TARGETS,
            "all_targets_met": all(row[3] is not False for row in rows),
            "calibration_ms": calibration,
            "cpus": os.cpu_count(),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
