"""Session benchmarks: append latency, loading a 100k-entry transcript, idle session memory, and
creating sessions in a store that already holds thousands.

Run from the repository root:

    python -m benchmarks.sessions.bench_transcripts [--entries 100000] [--appends 20000]

Prints a markdown table and writes `benchmarks/results/sessions.json`. Files go to a temporary
directory on the default temp filesystem (real disk unless TMPDIR points at tmpfs).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from itertools import cycle, islice
from pathlib import Path
from typing import Any

from benchmarks.report import print_table, write_results
from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.replay import messages_for_model
from nodmix.sessions.transcript import Transcript, count_messages

RESULTS = Path(__file__).resolve().parent.parent / "results" / "sessions.json"

TARGET_APPEND_MS = 0.2
TARGET_LOAD_S = 1.0
TARGET_IDLE_KB = 200.0

_WORDS = "the agent reads files runs tools and writes a short careful answer for the user".split()


def _text(n_chars: int, seed: int) -> str:
    words = islice(cycle(_WORDS[seed % len(_WORDS) :] + _WORDS), n_chars // 5)
    return " ".join(words)[:n_chars]


def realistic_messages() -> Iterator[Message]:
    """An endless turn pattern: user, assistant with a tool call, tool result, answer.

    Sizes follow real coding-agent sessions: short prompts, some reasoning, code-mode programs
    as tool arguments, and tool results around a kilobyte.
    """
    turn = 0
    while True:
        turn += 1
        call_id = f"call_{turn:06d}|fc_{turn}"
        yield UserMessage(content=(TextBlock(text=_text(180, turn)),))
        yield AssistantMessage(
            content=(
                ThinkingBlock(thinking=_text(300, turn + 1), thinking_signature="sig" * 10),
                TextBlock(text=_text(120, turn + 2)),
                ToolCallBlock(
                    id=call_id,
                    name="exec",
                    arguments={"code": _text(280, turn + 3), "language": "javascript"},
                ),
            ),
            provider="openai",
            model="gpt-5",
            api="openai-responses",
            usage=Usage(input=12000 + turn, output=350, cache_read=9000, total_tokens=21350),
            stop_reason="toolUse",
        )
        yield ToolResultMessage(
            tool_call_id=call_id,
            tool_name="exec",
            content=(TextBlock(text=_text(1000, turn + 4)),),
            is_error=False,
            details={"status": "completed", "runId": f"cm_{turn}", "durationMs": 42},
        )
        yield AssistantMessage(
            content=(TextBlock(text=_text(400, turn + 5)),),
            provider="openai",
            model="gpt-5",
            usage=Usage(input=13000, output=200, total_tokens=13200),
        )


def bench_append(directory: Path, appends: int) -> dict[str, Any]:
    """Per-entry `append_message` latency (encode + one os.write), no fsync."""
    transcript = Transcript.create(directory / "append.jsonl", session_id="append", cwd="/w")
    messages = list(islice(realistic_messages(), appends))
    for message in messages[:200]:  # warm up the descriptor and code paths
        transcript.append_message(message)
    samples: list[int] = []
    for message in messages:
        start = time.perf_counter_ns()
        transcript.append_message(message)
        samples.append(time.perf_counter_ns() - start)
    start = time.perf_counter_ns()
    transcript.sync()
    sync_ms = (time.perf_counter_ns() - start) / 1e6
    transcript.close()
    samples.sort()
    return {
        "appends": len(samples),
        "median_ms": statistics.median(samples) / 1e6,
        "p99_ms": samples[int(len(samples) * 0.99)] / 1e6,
        "mean_line_bytes": transcript.size_bytes / (len(samples) + 201),
        "sync_after_run_ms": sync_ms,
    }


def write_transcript(path: Path, entries: int) -> int:
    """Write a transcript with `entries` realistic entries; return its size in bytes."""
    transcript = Transcript.create(path, session_id=path.stem, cwd="/w")
    for message in islice(realistic_messages(), entries):
        transcript.append_message(message)
    transcript.close()
    return path.stat().st_size


def bench_load(directory: Path, entries: int, runs: int = 3) -> dict[str, Any]:
    """Loading (parse every line into entries), then replaying, a large transcript."""
    path = directory / "large.jsonl"
    size = write_transcript(path, entries)
    load_times: list[float] = []
    loaded = None
    for _ in range(runs):
        loaded = None
        gc.collect()
        start = time.perf_counter()
        loaded = Transcript.load(path)
        load_times.append(time.perf_counter() - start)
    assert loaded is not None and len(loaded.entries) == entries
    start = time.perf_counter()
    replayed = messages_for_model(loaded.entries)
    replay_s = time.perf_counter() - start
    assert len(replayed) == entries
    start = time.perf_counter()
    counted = count_messages(path)
    count_s = time.perf_counter() - start
    assert counted == entries
    return {
        "entries": entries,
        "file_mb": size / 1e6,
        "load_median_s": statistics.median(load_times),
        "load_runs_s": load_times,
        "replay_s": replay_s,
        "count_messages_s": count_s,
    }


def bench_idle_memory(directory: Path, sessions: int, turns: int) -> dict[str, Any]:
    """Python heap held per open session after `turns` short turns, loaded from disk."""
    state = directory / "state"
    writer = SessionManager(state, durable=False)
    source = realistic_messages()
    for i in range(sessions):
        session = writer.open(f"chat:{i}")
        for message in islice(source, 4 * turns):
            session.append_message(message)
    writer.close()

    manager = SessionManager(state, durable=False, read_only=True)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    keep = [manager.open(f"chat:{i}") for i in range(sessions)]
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    total = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    bytes_per_file = sum(s.transcript.size_bytes for s in keep) / sessions
    return {
        "sessions": sessions,
        "entries_per_session": 4 * turns,
        "transcript_kb_per_session": bytes_per_file / 1024,
        "idle_kb_per_session": total / sessions / 1024,
    }


def bench_create(directory: Path, sessions: int) -> dict[str, Any]:
    """Open new sessions (store entry + transcript file) into a store that keeps growing:
    the median for the first 100 and for the last 100, so a cost that grows with the store
    shows up."""
    manager = SessionManager(directory / "create", durable=True)
    times: list[float] = []
    for i in range(sessions):
        start = time.perf_counter()
        manager.open(f"openai:{i:020x}")
        times.append((time.perf_counter() - start) * 1000)
    manager.close()
    return {
        "sessions": sessions,
        "first_100_median_ms": statistics.median(times[:100]),
        "last_100_median_ms": statistics.median(times[-100:]),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print a table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=3, help="turns per short session")
    parser.add_argument("--create", type=int, default=3000, help="sessions to create")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="nodmix-bench-sessions-") as tmp:
        directory = Path(tmp)
        append = bench_append(directory, args.appends)
        load = bench_load(directory, args.entries)
        memory = bench_idle_memory(directory, args.sessions, args.turns)
        create = bench_create(directory, args.create)

    rows = [
        (
            "append_message, median per entry",
            f"{append['median_ms']:.4f} ms (p99 {append['p99_ms']:.4f} ms)",
            f"≤ {TARGET_APPEND_MS} ms",
            append["median_ms"] <= TARGET_APPEND_MS,
        ),
        (
            f"load {load['entries']:,} entries ({load['file_mb']:.0f} MB)",
            f"{load['load_median_s']:.3f} s",
            f"≤ {TARGET_LOAD_S} s",
            load["load_median_s"] <= TARGET_LOAD_S,
        ),
        (
            f"replay {load['entries']:,} entries for the model",
            f"{load['replay_s']:.3f} s",
            "-",
            None,
        ),
        (
            f"idle memory per open session ({memory['entries_per_session']} entries)",
            f"{memory['idle_kb_per_session']:.1f} KB",
            f"≤ {TARGET_IDLE_KB:.0f} KB",
            memory["idle_kb_per_session"] <= TARGET_IDLE_KB,
        ),
        (
            "open a new session (store entry + transcript), first / last 100 of "
            f"{create['sessions']:,}",
            f"{create['first_100_median_ms']:.3f} / {create['last_100_median_ms']:.3f} ms",
            "-",
            None,
        ),
    ]
    print_table(rows)

    document = {
        "benchmark": "sessions.transcripts",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "append": append,
        "load": load,
        "idle_memory": memory,
        "create": create,
        "targets": {
            "append_median_ms": TARGET_APPEND_MS,
            "load_s": TARGET_LOAD_S,
            "idle_kb_per_session": TARGET_IDLE_KB,
        },
        "all_targets_met": all(ok is not False for *_, ok in rows),
    }
    write_results(args.output, document)
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
