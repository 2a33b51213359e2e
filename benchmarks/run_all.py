"""Run every benchmark in a fresh process and regenerate `docs/benchmarks.md`.

    python -m benchmarks.run_all [--only NAME ...]

Each benchmark prints a markdown table (and writes JSON under `benchmarks/results/`); this
collects the tables, with the exact command that produced each, into the document.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.report import cpu_calibration_ms

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    module: str
    args: tuple[str, ...]
    issue: str


BENCHMARKS = (
    Benchmark(
        "agent",
        "Agent runtime: start-up and loop overhead",
        "benchmarks.agent.bench_agent",
        ("--runs", "11"),
        "agent runtime",
    ),
    Benchmark(
        "sessions",
        "Transcripts and sessions",
        "benchmarks.sessions.bench_transcripts",
        (),
        "agent runtime",
    ),
    Benchmark(
        "exec-policy",
        "Exec policy check",
        "benchmarks.security.bench_policy",
        (),
        "safe by default",
    ),
    Benchmark(
        "sandbox",
        "Sandbox (QuickJS-WASI cells)",
        "benchmarks.sandbox.bench_sandbox",
        (),
        "code mode",
    ),
    Benchmark(
        "codemode",
        "Code mode (exec/wait through the engine)",
        "benchmarks.codemode.bench_codemode",
        ("--reps", "30"),
        "code mode, MCP",
    ),
    Benchmark(
        "codemode_run_files",
        "Code mode: suspended runs on disk",
        "benchmarks.codemode.bench_run_files",
        ("--reps", "30"),
        "reliability under load and faults",
    ),
    Benchmark("mcp", "MCP servers", "benchmarks.mcp.bench_mcp", (), "MCP"),
    Benchmark(
        "context",
        "Context management",
        "benchmarks.context.bench_context",
        (),
        "context management",
    ),
    Benchmark(
        "skills",
        "Skills: prompt cost and discovery",
        "benchmarks.skills.bench_skills",
        (),
        "skills and memory search",
    ),
    Benchmark("gateway", "Gateway", "benchmarks.gateway.bench_gateway", (), "gateway"),
    Benchmark(
        "gateway-load",
        "Gateway under load",
        "benchmarks.gateway.bench_load",
        (),
        "reliability under load and faults",
    ),
    Benchmark(
        "open-files",
        "Gateway: open files and memory over 10,000 sessions",
        "benchmarks.gateway.bench_open_files",
        (),
        "reliability under load and faults",
    ),
    Benchmark(
        "streaming",
        "Streaming a huge model reply",
        "benchmarks.providers.bench_streaming",
        (),
        "reliability under load and faults",
    ),
    Benchmark(
        "value",
        "Code mode's value: tokens, round trips, search quality",
        "benchmarks.value.run",
        (),
        "code-mode value",
    ),
    Benchmark(
        "memory",
        "Memory search over 10,000 notes",
        "benchmarks.memory.bench_memory",
        (),
        "skills and memory search",
    ),
    Benchmark(
        "sandbox-exec",
        "Sandboxed shell (bubblewrap)",
        "benchmarks.security.bench_sandbox_exec",
        ("--runs", "41"),
        "safe by default",
    ),
    Benchmark(
        "automation",
        "Automation: idle cost of scheduled jobs, firing lateness",
        "benchmarks.automation.bench_automation",
        (),
        "automation",
    ),
    Benchmark(
        "subagents",
        "Subagents: spawn overhead and a 20-way fan-out",
        "benchmarks.subagents.bench_subagents",
        ("--pairs", "200"),
        "subagents",
    ),
    Benchmark(
        "channels",
        "Channels (Telegram through the scripted Bot API)",
        "benchmarks.channels.bench_channels",
        (),
        "channels",
    ),
    Benchmark(
        "channels-memory",
        "Channels: memory per idle channel",
        "benchmarks.channels.bench_memory",
        ("--rounds", "1"),
        "channels",
    ),
    Benchmark(
        "install",
        "Install: packages, disk and time of pip install",
        "benchmarks.install.bench_install",
        (),
        "light install",
    ),
    Benchmark(
        "media",
        "Media: preparing a photo, images in a request",
        "benchmarks.media.bench_media",
        (),
        "pictures and voice",
    ),
    Benchmark(
        "channels-discord-slack",
        "Channels: Discord and Slack through their scripted servers",
        "benchmarks.channels.bench_discord_slack",
        (),
        "more channels",
    ),
    Benchmark(
        "state_replicas",
        "Gateway replicas on PostgreSQL",
        "benchmarks.state.bench_replicas",
        ("--turns", "400"),
        "replicas sharing state in PostgreSQL",
    ),
    Benchmark(
        "channels-teams-gchat",
        "Channels: Microsoft Teams and Google Chat through their scripted services",
        "benchmarks.channels.bench_teams_gchat",
        (),
        "six more channels",
    ),
    Benchmark(
        "web",
        "Web search and the browser",
        "benchmarks.web.bench_web",
        (),
        "web search and browser",
    ),
)


def _tables(stdout: str) -> str:
    """The markdown tables (and headings) a benchmark printed, without progress chatter."""
    keep = [line for line in stdout.splitlines() if line.startswith(("|", "#"))]
    out: list[str] = []
    for line in keep:
        if line.startswith("#") and out and out[-1] != "":
            out.append("")
        out.append(line)
        if line.startswith("#"):
            out.append("")
    return "\n".join(out).strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="run only these benchmarks")
    args = parser.parse_args()
    chosen = [b for b in BENCHMARKS if not args.only or b.name in args.only]
    sections: list[str] = []
    failed = []
    started = time.monotonic()
    calibration = cpu_calibration_ms()
    for bench in chosen:
        command = [sys.executable, "-m", bench.module, *bench.args]
        shown = " ".join(["python", "-m", bench.module, *bench.args])
        print(f"== {bench.name}: {shown}", flush=True)
        t0 = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        elapsed = time.monotonic() - t0
        if done.returncode != 0:
            failed.append(bench.name)
            print(done.stderr[-2000:], file=sys.stderr)
            body = f"Failed (exit {done.returncode}); see `{shown}`."
        else:
            body = _tables(done.stdout)
            print(body)
        sections.append(
            f"## {bench.title}\n\nIssue: {bench.issue}. Command (from the repository root, in "
            f"the venv): `{shown}` ({elapsed:.0f} s).\n\n{body}\n"
        )
    total = time.monotonic() - started
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = (
        "# Benchmarks\n\n"
        f"Generated by `make bench` (`python -m benchmarks.run_all`) on {now} in {total:.0f} s.\n"
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, Python "
        f"{platform.python_version()}; CPU calibration (a fixed 3M-iteration Python loop): "
        f"{calibration:.0f} ms, lower on a faster or quieter machine. Numbers "
        "are medians unless stated; timings on a shared "
        "machine vary by 10-30% between runs. Each section's command regenerates its table "
        "alone; raw results are written to `benchmarks/results/*.json`.\n"
    )
    notes = ROOT / "docs" / "benchmarks-notes.md"
    extra = "\n" + notes.read_text(encoding="utf-8") if notes.exists() else ""
    if args.only and DOC.exists():
        print("(partial run: docs/benchmarks.md left unchanged)")
    else:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(header + "\n" + "\n".join(sections) + extra, encoding="utf-8")
        print(f"wrote {DOC} in {total:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
