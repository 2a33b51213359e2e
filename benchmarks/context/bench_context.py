"""Context benchmarks: planning a compaction, and the per-request cost of context management.

Run from the repository root:

    python -m benchmarks.context.bench_context [--messages 50000] [--runs 7]

Prints a markdown table and writes `benchmarks/results/context.json`.

- *plan*: `plan_compaction` (items, cut point, chunking, token accounting) over a transcript of
  realistic coding-agent turns, loaded from a real JSONL file.
- *assembly overhead*: what every model request pays with the legacy engine: `assemble` plus
  the turn guard's `review` (request estimate, usage accounting, tool-result pruning), per
  1,000 messages of history. Replaying the transcript (`messages_for_model`) existed before and
  is reported separately.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import anyio

from benchmarks.report import print_table, write_results
from benchmarks.sessions.bench_transcripts import realistic_messages
from nodmix.agents import AgentProfile
from nodmix.compaction.base import SummaryRequest
from nodmix.compaction.compactor import CompactionRequest, Compactor
from nodmix.compaction.guard import TurnGuard
from nodmix.compaction.plan import CompactionPlan, plan_compaction
from nodmix.compaction.service import CompactionService
from nodmix.compaction.settings import CompactionSettings
from nodmix.config.schema import CompactionConfig
from nodmix.context.base import AssembleParams
from nodmix.context.guard import RequestDraft
from nodmix.context.legacy import LegacyContextEngine
from nodmix.hooks import Hooks
from nodmix.providers.base import ModelSpec
from nodmix.sessions import SessionManager
from nodmix.sessions.replay import messages_for_model
from nodmix.tools import core_tools

RESULTS = Path(__file__).resolve().parent.parent / "results" / "context.json"

TARGET_PLAN_MS = 200.0
TARGET_ASSEMBLY_MS_PER_1K = 1.0
WINDOW = 100_000_000  # large enough that the overhead runs never compact


@dataclass(frozen=True)
class _Resolved:
    provider: Any
    spec: ModelSpec


class _Models:
    def resolve(self, ref: str) -> _Resolved:
        return _Resolved(None, ModelSpec(provider="bench", id="m", context_window=WINDOW))


def _timed(fn: Callable[[], Any], runs: int) -> tuple[float, list[float]]:
    fn()  # warm up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), samples


def _session(manager: SessionManager, key: str, messages: int) -> Any:
    session = manager.open(key)
    for message in islice(realistic_messages(), messages):
        session.append_message(message)
    session.transcript.close()
    return SessionManager(manager.state_dir, durable=False).open(key)


def bench_plan(manager: SessionManager, messages: int, runs: int) -> dict[str, Any]:
    """Planning a compaction (default settings for a 128k model) over `messages` messages."""
    session = _session(manager, "agent:main:plan", messages)
    settings = CompactionSettings.resolve(None, context_window=128_000)
    holder: list[CompactionPlan | str] = []

    def plan() -> None:
        holder[:] = [
            plan_compaction(
                session.entries,
                keep_tokens=settings.keep_recent_tokens,
                summary_window=settings.context_window,
            )
        ]

    median, samples = _timed(plan, runs)
    result = holder[0]
    assert isinstance(result, CompactionPlan)
    return {
        "messages": messages,
        "median_ms": median,
        "runs_ms": samples,
        "summarised_items": result.history_end,
        "kept_items": len(result.items) - result.cut,
        "chunks": len(result.chunks),
        "tokens_before": result.tokens_before,
    }


async def _overhead(manager: SessionManager, messages: int, runs: int) -> dict[str, Any]:
    session = _session(manager, f"agent:main:turn{messages}", messages)
    agent = AgentProfile(
        id="main",
        name="bench",
        model="bench/m",
        fallbacks=(),
        workspace=manager.state_dir,
        tools=None,
        code_mode=None,
        compaction=CompactionConfig(),
        instructions=None,
    )
    service = CompactionService(
        models=_Models(),
        sessions=manager,
        hooks=Hooks(),
        providers=dict,
        agent_for_key=lambda key: agent,
        model_refs=lambda a: ("bench/m",),
    )
    engine = LegacyContextEngine(service.compact_with_runtime)
    guard = TurnGuard(
        service=service,
        engine=engine,
        agent=agent,
        session=session,
        refs=("bench/m",),
        emit=lambda event: None,
    )
    specs = [t.spec for t in core_tools()]
    system = "You are a benchmark. " * 200
    history = messages_for_model(session.entries)

    async def request() -> None:
        assembled = await engine.assemble(
            AssembleParams(
                session_id=session.session_id,
                session_key=session.key,
                messages=history,
                token_budget=guard.token_budget,
            )
        )
        draft = RequestDraft(assembled=assembled, unwindowed=history, system=system, tools=specs)
        plan = await guard.review(draft, may_compact=True)
        assert not plan.compact, plan.tokens

    await request()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await request()
        samples.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    messages_for_model(session.entries)
    replay_ms = (time.perf_counter() - start) * 1000
    median = statistics.median(samples)
    return {
        "messages": len(history),
        "median_ms": median,
        "ms_per_1k_messages": median / (len(history) / 1000),
        "replay_ms_per_1k_messages": replay_ms / (len(history) / 1000),
    }


async def _full_compaction(manager: SessionManager, messages: int) -> dict[str, Any]:
    session = _session(manager, "agent:main:full", messages)

    async def summarize(request: SummaryRequest) -> str:
        return "## Goal\nbench"

    compactor = Compactor(
        settings=CompactionSettings.resolve(
            CompactionConfig(mode="default"), context_window=128_000
        ),
        summarizer=summarize,
        sessions=manager,
    )
    start = time.perf_counter()
    result = await compactor.compact(session, CompactionRequest(trigger="auto"))
    elapsed = (time.perf_counter() - start) * 1000
    assert result.compacted
    return {
        "messages": messages,
        "ms": elapsed,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print a table and write the JSON results."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="nodmix-bench-context-") as tmp:
        manager = SessionManager(Path(tmp), durable=False)
        plan = bench_plan(manager, args.messages, args.runs)
        overhead = [
            anyio.run(_overhead, manager, n, args.runs) for n in (1_000, 10_000, args.messages)
        ]
        full = anyio.run(_full_compaction, manager, args.messages)

    worst = max(o["ms_per_1k_messages"] for o in overhead)
    rows = [
        (
            f"plan a compaction of {plan['messages']:,} messages ({plan['chunks']} chunks)",
            f"{plan['median_ms']:.1f} ms",
            f"≤ {TARGET_PLAN_MS:.0f} ms",
            plan["median_ms"] <= TARGET_PLAN_MS,
        ),
        *(
            (
                f"assembly overhead, legacy engine, {o['messages']:,} messages",
                f"{o['ms_per_1k_messages']:.3f} ms / 1k messages ({o['median_ms']:.2f} ms)",
                f"≤ {TARGET_ASSEMBLY_MS_PER_1K} ms / 1k",
                o["ms_per_1k_messages"] <= TARGET_ASSEMBLY_MS_PER_1K,
            )
            for o in overhead
        ),
        (
            "transcript replay (existing, for reference)",
            f"{overhead[-1]['replay_ms_per_1k_messages']:.3f} ms / 1k messages",
            "-",
            None,
        ),
        (
            f"whole compaction of {full['messages']:,} messages, instant summariser",
            f"{full['ms']:.0f} ms",
            "-",
            None,
        ),
    ]
    print_table(rows)

    document = {
        "benchmark": "context",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "plan": plan,
        "assembly_overhead": overhead,
        "full_compaction": full,
        "targets": {"plan_ms": TARGET_PLAN_MS, "assembly_ms_per_1k": TARGET_ASSEMBLY_MS_PER_1K},
        "worst_assembly_ms_per_1k": worst,
        "all_targets_met": all(ok is not False for *_, ok in rows),
    }
    write_results(args.output, document)
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
