"""Agent runtime benchmarks: CLI start-up to the first model request, and loop overhead per step.

Run from the repository root:

    python -m benchmarks.agent.bench_agent [--runs 15] [--steps 200]

Start-up: a scripted OpenAI-compatible model server runs in this process and records when each
request arrives; `nodmix agent --local -m hi` is started as a fresh process and the time from
`Popen` to the request's arrival is measured (interpreter start, imports, config, plugin
discovery, session open and the HTTP request itself). Its target is stated for a CPU
calibration of 110 ms (`benchmarks.report.cpu_calibration_ms`) and scales with the calibration
measured around the runs.

Library floor: in the same loop, alternating with the agent's runs, a process with no Nodmix
code imports anyio, msgspec and httpx2 and streams one chat request to the same server (the
client Nodmix uses for a plain-HTTP provider). What the libraries cost is paid by any process
built on them; the difference between the two medians is Nodmix's own share of start-up.

Loop overhead: one turn of N model steps, each calling a no-op tool, against an in-process
model; the time spent inside the model and the tool is subtracted, leaving what the loop itself
costs per step (context assembly, system prompt, transcript appends, executor, events).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from benchmarks.report import cpu_calibration_ms, print_table, write_results
from nodmix.providers.base import ModelEvent, ModelRequest
from nodmix.providers.fake import FunctionProvider, ModelReply
from nodmix.testing.model_server import ScriptedModelServer

RESULTS = Path(__file__).resolve().parent.parent / "results" / "agent.json"
TARGET_STARTUP_MS = 150.0
"""Start-up target at `TARGET_CALIBRATION_MS`; a slower or busier machine scales it."""
TARGET_CALIBRATION_MS = 110.0
TARGET_STEP_MS = 2.0

FLOOR_SCRIPT = """
import sys

import anyio
import httpx2
import msgspec


async def main(url):
    body = msgspec.json.encode(
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    )
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    async with httpx2.AsyncClient(verify=False, timeout=30) as client:
        request = client.stream("POST", url + "/chat/completions", content=body, headers=headers)
        async with request as response:
            async for _ in response.aiter_bytes():
                pass


anyio.run(main, sys.argv[1])
"""
"""The library floor: the imports and the one request every start-up pays, and no Nodmix."""


def _config(state: Path, base_url: str) -> None:
    (state / "nodmix.json").write_text(
        json.dumps(
            {
                "models": {
                    "providers": {
                        "local": {
                            "api": "openai-completions",
                            "baseUrl": base_url,
                            "apiKey": "bench",
                            "models": [{"id": "m", "contextWindow": 32000, "maxTokens": 1024}],
                        }
                    }
                },
                "agents": {"defaults": {"model": {"primary": "local/m"}}},
            }
        ),
        encoding="utf-8",
    )


def bench_startup(runs: int) -> dict[str, Any]:
    """Process start to the first model request, `nodmix agent --local` and the library floor
    (alternating, so both see the same machine load)."""
    arrivals: list[float] = []

    def respond(request: ModelRequest) -> ModelReply:
        arrivals.append(time.perf_counter())
        return ModelReply.text("ok")

    samples: dict[str, list[float]] = {"agent": [], "floor": []}
    calibrations = [cpu_calibration_ms()]
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(respond) as server:
        state = Path(tmp)
        _config(state, server.base_url)
        env = {**os.environ, "NODMIX_STATE_DIR": str(state), "NODMIX_CONFIG_PATH": ""}
        env.pop("NODMIX_CONFIG_PATH")
        exe = Path(sys.executable).parent / "nodmix"
        command = [str(exe)] if exe.exists() else [sys.executable, "-m", "nodmix"]
        commands = {
            "agent": [*command, "agent", "--local", "-m", "hi", "--json"],
            "floor": [sys.executable, "-c", FLOOR_SCRIPT, server.base_url],
        }
        for i in range(runs + 1):
            for name, argv in commands.items():
                before = len(arrivals)
                start = time.perf_counter()
                done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
                if done.returncode != 0 or len(arrivals) != before + 1:
                    raise RuntimeError(f"{name} run failed: {done.stderr.strip()}")
                if i:  # the first run warms the OS file cache, bytecode and Nodmix's caches
                    samples[name].append((arrivals[-1] - start) * 1000)
    calibrations.append(cpu_calibration_ms())
    return {
        "runs": runs,
        "calibration_ms": statistics.mean(calibrations),
        **_summary(samples["agent"]),
        "floor": _summary(samples["floor"]),
    }


def _summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples),
        "p90_ms": sorted(samples)[int(len(samples) * 0.9) - 1],
        "min_ms": min(samples),
    }


class _TimedProvider:
    """Wraps a provider and adds up the time spent inside its stream."""

    def __init__(self, inner: FunctionProvider) -> None:
        self.inner = inner
        self.spent = 0.0
        self.name, self.api = inner.name, inner.api

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        events = self.inner.stream(request)
        while True:
            start = time.perf_counter()
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                self.spent += time.perf_counter() - start
                return
            self.spent += time.perf_counter() - start
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _loop_overhead(steps: int) -> dict[str, Any]:
    from nodmix.agents import AgentProfile
    from nodmix.config.schema import CompactionConfig
    from nodmix.context.legacy import LegacyContextEngine
    from nodmix.hooks import Hooks
    from nodmix.loop import RunTools, TurnDeps, TurnRequest, run_turn
    from nodmix.messages import user_message
    from nodmix.providers.base import ModelSpec
    from nodmix.sessions import SessionManager
    from nodmix.tools import FunctionTool, ToolContext, ToolResult
    from nodmix.tools.executor import ToolExecutor

    tool_time = 0.0

    async def noop(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        nonlocal tool_time
        start = time.perf_counter()
        result = ToolResult.text("done")
        tool_time += time.perf_counter() - start
        return result

    count = 0

    def respond(request: ModelRequest) -> ModelReply:
        nonlocal count
        count += 1
        if count >= steps:
            return ModelReply.text("finished")
        return ModelReply.tool_call("noop", {"n": count})

    provider = _TimedProvider(FunctionProvider(respond))

    class Resolver:
        def resolve(self, ref: str) -> Any:
            class Resolved:
                pass

            r = Resolved()
            r.provider = provider  # type: ignore[attr-defined]
            r.spec = ModelSpec(provider="bench", id="m")  # type: ignore[attr-defined]
            return r

    tool = FunctionTool.create(
        noop,
        name="noop",
        description="Does nothing.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        session = SessionManager(state).open("agent:main:main")
        agent = AgentProfile(
            id="main",
            name="Bench",
            model="bench/m",
            fallbacks=(),
            workspace=state / "ws",
            tools=None,
            code_mode=None,
            compaction=CompactionConfig(),
            instructions=None,
            max_steps=steps + 1,
        )
        deps = TurnDeps(
            models=Resolver(), executor=ToolExecutor(Hooks()), context=LegacyContextEngine()
        )
        request = TurnRequest(
            agent=agent,
            session=session,
            prompt=user_message("go"),
            run_id="bench",
            tools=RunTools(visible=(tool,)),
            model_refs=("bench/m",),
        )
        start = time.perf_counter()
        result = await run_turn(deps, request, lambda event: None)
        total = time.perf_counter() - start
    overhead = total - provider.spent - tool_time
    return {
        "steps": result.steps,
        "total_ms": total * 1000,
        "model_ms": provider.spent * 1000,
        "tool_ms": tool_time * 1000,
        "overhead_per_step_ms": overhead * 1000 / result.steps,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    startup = bench_startup(args.runs)
    loop = anyio.run(_loop_overhead, args.steps)
    calibration = startup["calibration_ms"]
    floor = startup["floor"]
    target = TARGET_STARTUP_MS * calibration / TARGET_CALIBRATION_MS
    rows = [
        (
            "`nodmix agent --local` start to first model request (median)",
            f"{startup['median_ms']:.0f} ms (p90 {startup['p90_ms']:.0f}; "
            f"calibration {calibration:.0f} ms)",
            f"≤ {TARGET_STARTUP_MS:.0f} ms at calibration {TARGET_CALIBRATION_MS:.0f} "
            f"(≤ {target:.0f} ms here)",
            startup["median_ms"] <= target,
        ),
        (
            "library floor: a process that imports anyio, msgspec and httpx2 and sends one "
            "request (no Nodmix code), start to request (median)",
            f"{floor['median_ms']:.0f} ms (p90 {floor['p90_ms']:.0f}); Nodmix's own share "
            f"{startup['median_ms'] - floor['median_ms']:.0f} ms",
            "-",
            None,
        ),
        (
            f"loop overhead per step ({loop['steps']} steps, model and tool time excluded)",
            f"{loop['overhead_per_step_ms']:.2f} ms",
            f"≤ {TARGET_STEP_MS:.0f} ms",
            loop["overhead_per_step_ms"] <= TARGET_STEP_MS,
        ),
    ]
    print_table(rows)
    document = {
        "benchmark": "agent",
        "startup": startup,
        "loop": loop,
        "all_targets_met": all(row[3] is not False for row in rows),
    }
    write_results(args.output, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
