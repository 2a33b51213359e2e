"""Sandboxed shell benchmark: the overhead bubblewrap adds to an `exec` call.

Run from the repository root:

    python -m benchmarks.security.bench_sandbox_exec [--runs 41]

Runs the real `exec` tool with `true`, alternating an unsandboxed call (main session) and a
sandboxed one (a `non-main` session under bubblewrap), and reports the medians and the median
of the paired differences. Prints a markdown table and writes
`benchmarks/results/sandbox_exec.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from benchmarks.report import write_results
from nodmix.security.sandbox.policy import SandboxSettings
from nodmix.security.sandbox.session import SessionSandbox
from nodmix.tools.base import ToolContext
from nodmix.tools.core.exec import ExecTool

RESULTS = Path(__file__).resolve().parent.parent / "results" / "sandbox_exec.json"
TARGET_OVERHEAD_MS = 30.0


def _ctx(workspace: Path, session: str) -> ToolContext:
    return ToolContext(
        agent_id="main",
        session_key=f"agent:main:{session}",
        session_id="bench",
        run_id="bench",
        call_id="bench",
        workspace=workspace,
    )


async def _measure(runs: int, root: Path) -> dict[str, float]:
    workspace = root / "workspace"
    workspace.mkdir()
    (root / "state").mkdir()
    sandbox = SessionSandbox(
        SandboxSettings(mode="non-main"), state_dir=root / "state", home=root / "home"
    )
    tool = ExecTool(isolation=sandbox)
    plain_ctx, boxed_ctx = _ctx(workspace, "main"), _ctx(workspace, "bench")
    first = await tool.call({"command": "true"}, boxed_ctx)  # the once-per-process probe
    if first.is_error or not first.details["sandboxed"]:
        raise SystemExit(f"the sandbox did not run: {first.text_content}")
    plain: list[float] = []
    boxed: list[float] = []
    for _ in range(runs):
        for ctx, samples in ((plain_ctx, plain), (boxed_ctx, boxed)):
            start = time.perf_counter()
            await tool.call({"command": "true"}, ctx)
            samples.append((time.perf_counter() - start) * 1000)
    overhead = [b - p for p, b in zip(plain, boxed, strict=True)]
    return {
        "runs": runs,
        "unsandboxed_median_ms": statistics.median(plain),
        "sandboxed_median_ms": statistics.median(boxed),
        "sandboxed_p90_ms": statistics.quantiles(boxed, n=10)[-1],
        "overhead_median_ms": statistics.median(overhead),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=41)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nodmix-bench-sandbox-") as tmp:
        result = anyio.run(_measure, args.runs, Path(tmp))
    ok = result["overhead_median_ms"] <= TARGET_OVERHEAD_MS
    print("| benchmark | result | target | ok |")
    print("|---|---|---|---|")
    print(f"| `exec` of `true`, unsandboxed | {result['unsandboxed_median_ms']:.1f} ms | - | - |")
    print(
        f"| `exec` of `true` under bubblewrap | {result['sandboxed_median_ms']:.1f} ms "
        f"(p90 {result['sandboxed_p90_ms']:.1f}) | - | - |"
    )
    print(
        f"| sandbox overhead (median of {result['runs']} paired runs) | "
        f"{result['overhead_median_ms']:.1f} ms | ≤ {TARGET_OVERHEAD_MS:.0f} ms | "
        f"{'yes' if ok else 'NO'} |"
    )
    document = {
        "benchmark": "security.sandbox_exec",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        **result,
        "target_overhead_ms": TARGET_OVERHEAD_MS,
        "all_targets_met": ok,
    }
    write_results(args.output, document)
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
