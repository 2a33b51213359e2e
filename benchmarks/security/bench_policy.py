"""Exec policy benchmark: the cost of the gate every tool call passes.

Run from the repository root:

    python -m benchmarks.security.bench_policy [--calls 20000]

Measures `ExecGate.check` (what `ToolExecutor.run` adds per call) for a non-shell tool, for
`exec` under the owner's defaults, and for `exec` under `allowlist` with 200 patterns: a
command seen before (parse cached) and a new command each call (parsed with `shlex`). Prints a
markdown table and writes `benchmarks/results/security.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nodmix.config.schema import ExecToolConfig, NodmixConfig, ToolsConfig
from nodmix.origin import TurnOrigin
from nodmix.security.allowlist import Allowlist
from nodmix.security.approvals import ApprovalBroker
from nodmix.security.gate import ExecGate
from nodmix.security.parts import cached_rules
from nodmix.security.turns import TurnHandle, TurnRegistry
from nodmix.tools import core_tools
from nodmix.tools.base import Tool, ToolContext

RESULTS = Path(__file__).resolve().parent.parent / "results" / "security.json"
TARGET_US = 50.0
BATCH = 500


def _gate(state: Path, config: NodmixConfig) -> ExecGate:
    allowlist = Allowlist(state)
    for i in range(199):
        allowlist.add(f"tool{i} --flag *")
    allowlist.add("git log **")
    return ExecGate(
        rules_for=cached_rules(lambda: config),
        allowlist=allowlist,
        broker=ApprovalBroker(),
        turns=TurnRegistry(),
    )


async def _per_call_us(
    gate: ExecGate, tool: Tool, ctx: ToolContext, make_args: Any, calls: int
) -> list[float]:
    """Microseconds per call, one sample per batch of BATCH calls."""
    samples: list[float] = []
    i = 0
    for _ in range(max(1, calls // BATCH)):
        batch = [make_args(i + n) for n in range(BATCH)]
        i += BATCH
        start = time.perf_counter_ns()
        for args in batch:
            if await gate.check(tool, args, ctx) is not None:
                raise AssertionError(f"the gate refused {args}")
        samples.append((time.perf_counter_ns() - start) / BATCH / 1000)
    return samples


async def run(calls: int) -> dict[str, Any]:
    tools = {t.spec.name: t for t in core_tools(ToolsConfig())}
    exec_tool, read_tool = tools["exec"], tools["read"]
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        ctx = ToolContext(
            agent_id="main",
            session_key="agent:main:bench",
            session_id="s",
            run_id="run_bench",
            call_id="c",
            workspace=state,
        )
        owner = _gate(state / "owner", NodmixConfig())
        owner.turns.add("run_bench", ctx.session_key, TurnHandle(None))
        guarded_config = NodmixConfig(
            tools=ToolsConfig(exec=ExecToolConfig(security="allowlist", ask="on-miss"))
        )
        guarded = _gate(state / "guarded", guarded_config)
        guarded.turns.add(
            "run_bench", ctx.session_key, TurnHandle(TurnOrigin(channel="bench", chat_id="1"))
        )
        cases = {
            "non-shell tool (`read`)": (owner, read_tool, lambda i: {"path": "a.txt"}),
            "`exec`, owner defaults (no check)": (owner, exec_tool, lambda i: {"command": "ls"}),
            "`exec`, allowlist of 200, repeated command": (
                guarded,
                exec_tool,
                lambda i: {"command": "git log --oneline | git log -n 3"},
            ),
            "`exec`, allowlist of 200, new command each call": (
                guarded,
                exec_tool,
                lambda i: {"command": f"git log -n {i} --format=%h && git log --stat -{i}"},
            ),
        }
        out: dict[str, Any] = {}
        for name, (gate, tool, make_args) in cases.items():
            samples = await _per_call_us(gate, tool, ctx, make_args, calls)
            out[name] = {"median_us": statistics.median(samples), "max_us": max(samples)}
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    results = asyncio.run(run(args.calls))
    print("| policy check per tool call | median (µs) | worst batch (µs) | target | ok |")
    print("|---|---:|---:|---|---|")
    ok_all = True
    for name, result in results.items():
        ok = result["median_us"] <= TARGET_US
        ok_all &= ok
        print(
            f"| {name} | {result['median_us']:.2f} | {result['max_us']:.2f} | "
            f"≤ {TARGET_US:g} µs | {'yes' if ok else 'NO'} |"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "security.policy",
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "calls": args.calls,
                "results": results,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
