"""A bad day: `kill -9` of a real gateway, again and again, at the moments that hurt most.

Run from the repository root, in the venv:

    python -m benchmarks.faults.bad_day [--kills 110] [--seed 7]

One state directory and one scripted model server (`benchmarks.faults.model`) for the whole
campaign. Each round starts `nodmix gateway`, drives it over HTTP and ends with a SIGKILL:

- four chat sessions with ~1.5 KB messages on a 6,000-token window, two compacting in place and
  two with `truncateAfterCompaction` (agents `inplace` and `rotate`): auto-compaction fires
  every few turns;
- two code-mode sessions (agent `main`, `timeoutMs` 300) whose programs call a 0.8 s tool, so
  every run is parked (`waiting`) and resumed with `wait`;
- a cron job every 3 s (agent `cronner`) whose turn calls the same tool.

Kills alternate between crash points (`NODMIX_CRASH_AT`: right after a compaction's successor
switch, after a run is saved, after a result is recorded, after a resume took or finished a
run, after fired cron runs are on record) and a SIGKILL from outside after a random 0.3-4 s.
A last round without kills resumes every pending run and takes one more turn per session.

Counted (each must be 0):

- acknowledged replies lost: a reply the client received that is in no transcript file;
- sessions losing context: a chat request that shows neither verbatim nor in a summary the
  session's last acknowledged turn;
- waiting runs lost without a restart-specific code: a run the transcript shows `waiting` that
  never completes and is not failed with `lost_in_restart`, `snapshot_expired` or `aborted`;
- cron runs stuck `running` (`nodmix cron runs`, after the last gateway stopped), and cron
  slots started twice other than by a retry.

Prints a table and writes `benchmarks/results/bad_day.json`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2

from benchmarks.faults.model import FILLER, Context, make_respond
from benchmarks.report import print_table, write_results
from nodmix.testing.model_server import ScriptedModelServer

RESULTS = Path(__file__).resolve().parent.parent / "results" / "bad_day.json"
TOKEN = "bad-day-token"
CHATS = {"c-in-0": "inplace", "c-in-1": "inplace", "c-rot-0": "rotate", "c-rot-1": "rotate"}
CODE = ("cm-0", "cm-1")
CRASH_POINTS = (
    "sessions.successor-switched",
    "codemode.park-saved",
    "codemode.result-recorded@{n}",
    "codemode.resume-taken",
    "codemode.resume-finished",
    "automation.fired-recorded",
)
RESTART_CODES = {"lost_in_restart", "snapshot_expired", "aborted"}
NAP_PLUGIN = """
import anyio
from nodmix.plugins import Plugin
from nodmix.tools import ToolResult

async def nap(args, ctx):
    await anyio.sleep(0.8)
    return ToolResult.text("rested")

def register(api):
    api.tool(name="nap", description="Answers after 0.8 s.")(nap)

plugin = Plugin(id="napper", name="Napper", register=register)
"""


def _configure(state: Path, base_url: str) -> dict[str, str]:
    plugin = state / "napper.py"
    plugin.write_text(NAP_PLUGIN, encoding="utf-8")
    workspace = state / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("Ferry at 9:40.\n", encoding="utf-8")
    small = {"id": "small", "contextWindow": 6000, "maxTokens": 1024}
    big = {"id": "big", "contextWindow": 32000, "maxTokens": 2048}
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": base_url,
                    "apiKey": "sk-bad-day",
                    "models": [small, big],
                }
            }
        },
        "agents": {
            "defaults": {"model": {"primary": "local/big"}},
            "list": [
                {"id": "main", "tools": {"codeMode": {"enabled": True, "timeoutMs": 300}}},
                {"id": "inplace", "model": "local/small", "tools": {"deny": ["nap"]}},
                {
                    "id": "rotate",
                    "model": "local/small",
                    "tools": {"deny": ["nap"]},
                    "compaction": {"truncateAfterCompaction": True},
                },
                {"id": "cronner"},
            ],
        },
        "plugins": {"load": {"paths": [str(plugin)]}},
    }
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    return {
        **os.environ,
        "NODMIX_STATE_DIR": str(state),
        "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
    }


def _nodmix(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "nodmix", *args], env=env, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise RuntimeError(f"nodmix {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


class Gateway:
    """`nodmix gateway` in a subprocess; `url` once it listens."""

    def __init__(self, env: dict[str, str], crash: str | None) -> None:
        full = {**env, **({"NODMIX_CRASH_AT": crash} if crash else {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodmix", "gateway", "--port", "0", "--token", TOKEN],
            env=full,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.url = ""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "listening on" in line:
                self.url = line.split("listening on ", 1)[1].strip()
                break
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=30)

    def stop(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


class Driver:
    """The clients: chat and code-mode sessions, each a thread sending turns until told to
    stop or the gateway dies."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.next_turn = dict.fromkeys(CHATS, 1)
        self.acks: list[tuple[str, str]] = []
        """(agent, acknowledged reply marker) for every reply the client received."""
        self.answered_after_restart: Counter[str] = Counter()
        self.failed_after_restart: list[str] = []

    def round(self, url: str, stop: threading.Event, final: bool = False) -> None:
        threads = [
            threading.Thread(target=self._chat, args=(url, name, stop, final), daemon=True)
            for name in CHATS
        ] + [
            threading.Thread(target=self._code, args=(url, name, stop, final), daemon=True)
            for name in CODE
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _post(self, url: str, agent: str, session: str, text: str) -> str | None:
        body = {"model": f"nodmix/{agent}", "messages": [{"role": "user", "content": text}]}
        headers = {"authorization": f"Bearer {TOKEN}", "x-nodmix-session-key": session}
        try:
            reply = httpx2.post(
                f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60
            )
        except httpx2.HTTPError:
            return None  # the gateway died under the request
        if reply.status_code != 200:
            return None
        return str(reply.json()["choices"][0]["message"]["content"] or "")

    def _chat(self, url: str, name: str, stop: threading.Event, final: bool) -> None:
        agent = CHATS[name]
        first = True
        while not stop.is_set():
            n = self.next_turn[name]
            self.next_turn[name] = n + 1
            text = self._post(url, agent, name, f"turn {name} {n} {FILLER}")
            if text is None:
                if first and final:
                    self.failed_after_restart.append(name)
                return
            if first:
                self.answered_after_restart[name] += 1
                first = False
            if text.startswith(f"ack {name} {n} "):
                with self.context.lock:
                    self.context.acked[name] = n
                self.acks.append((agent, f"ack {name} {n} "))
            if final:
                return

    def _code(self, url: str, name: str, stop: threading.Event, final: bool) -> None:
        rounds = 0
        while not stop.is_set():
            text = self._post(url, "main", name, "go")
            if text is None:
                return
            rounds += 1
            if text.startswith("done "):
                self.acks.append(("main", text[:60]))
            if final and (text.startswith("done ") and rounds > 2):
                return


def _kill_round(env: dict[str, str], driver: Driver, rng: random.Random, index: int) -> str:
    """One gateway life, ended by a SIGKILL; what killed it."""
    point = CRASH_POINTS[index // 2 % len(CRASH_POINTS)] if index % 2 == 0 else None
    if point is not None:
        point = point.format(n=rng.randint(1, 4))
    gateway = Gateway(env, point)
    stop = threading.Event()
    work = threading.Thread(target=driver.round, args=(gateway.url, stop), daemon=True)
    work.start()
    deadline = time.monotonic() + (8.0 if point else rng.uniform(0.3, 4.0))
    while gateway.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    how = f"crash point {point}" if point and not gateway.alive() else "kill from outside"
    code = gateway.kill()
    stop.set()
    work.join(timeout=90)
    if code != -signal.SIGKILL:
        raise RuntimeError(f"round {index}: the gateway exited with {code}, not SIGKILL")
    return how


def _entries(state: Path, agent: str) -> list[dict[str, Any]]:
    """Every entry of every transcript file of `agent` (continued, archived and current)."""
    folder = state / "agents" / agent / "sessions"
    return [
        json.loads(line)
        for path in sorted(folder.rglob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()[1:]  # after the header
        if line.strip()
    ]


def _replies(entries: list[dict[str, Any]]) -> str:
    """The text of every assistant message, one per line."""
    texts = []
    for entry in entries:
        message = entry.get("message") or {}
        if message.get("role") == "assistant":
            blocks = message.get("content") or []
            texts.append("".join(b.get("text", "") for b in blocks if b.get("type") == "text"))
    return "\n".join(texts)


def _runs_lost(state: Path) -> tuple[int, int, Counter[str]]:
    """(runs told `waiting`, runs lost without a restart code, final outcomes)."""
    told: dict[str, str] = {}
    calls: dict[str, str] = {}
    for entry in _entries(state, "main"):
        message = entry.get("message") or {}
        if message.get("role") == "assistant":
            for block in message.get("content") or []:
                if block.get("type") == "toolCall" and block.get("name") == "wait":
                    calls[block["id"]] = str(block["arguments"].get("runId"))
        if message.get("role") != "toolResult" or message.get("toolName") not in ("exec", "wait"):
            continue
        details = message.get("details") or {}
        if details.get("status") == "waiting":
            told.setdefault(str(details["runId"]), "waiting")
        resumed = calls.get(message.get("toolCallId", ""))
        if resumed and details.get("status") in ("completed", "failed"):
            told[resumed] = details.get("code") or details["status"]
        elif resumed and details.get("status") == "waiting" and details.get("runId") != resumed:
            told[resumed] = "continued"
    outcomes = Counter(told.values())
    ok = {"completed", "continued", *RESTART_CODES}
    lost = sum(count for outcome, count in outcomes.items() if outcome not in ok)
    return len(told), lost, outcomes


def _cron(env: dict[str, str]) -> tuple[int, int, int, Counter[str]]:
    """(runs, stuck `running`, slots started twice, statuses) of the campaign's job."""
    (job,) = json.loads(_nodmix(env, "cron", "list", "--json"))["jobs"]
    runs = json.loads(_nodmix(env, "cron", "runs", job["id"], "--json"))["runs"]
    statuses = Counter(r["status"] for r in runs)
    slots = Counter(r.get("slot") for r in runs if r["trigger"] != "retry" and r.get("slot"))
    return len(runs), statuses["running"], sum(1 for c in slots.values() if c > 1), statuses


def campaign(kills: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    context = Context()
    driver = Driver(context)
    with tempfile.TemporaryDirectory(prefix="nodmix-bad-day-") as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        with ScriptedModelServer(make_respond(context)) as server:
            env = _configure(state, server.base_url)
            _nodmix(
                env,
                *("cron", "add", "--name", "tick", "--every", "3s", "--agent", "cronner"),
                *("--message", "cron tick", "--session", "isolated"),
            )
            started = time.monotonic()
            how: Counter[str] = Counter()
            for index in range(kills):
                how[_kill_round(env, driver, rng, index)] += 1
            final = Gateway(env, None)
            driver.round(final.url, threading.Event(), final=True)
            final.stop()
            elapsed = time.monotonic() - started
        entries = {agent: _entries(state, agent) for agent in ("inplace", "rotate", "main")}
        replies = {agent: _replies(found) for agent, found in entries.items()}
        lost_acks = [marker for agent, marker in driver.acks if marker not in replies[agent]]
        told, runs_lost, outcomes = _runs_lost(state)
        cron_runs, stuck, twice, statuses = _cron(env)
        compactions = sum(
            1 for a in ("inplace", "rotate") for e in entries[a] if e.get("type") == "compaction"
        )
    return {
        "kills": kills,
        "killed_by": dict(how),
        "seconds": round(elapsed),
        "acknowledged_replies": len(driver.acks),
        "acknowledged_replies_lost": len(lost_acks),
        "chat_requests_checked": context.requests,
        "sessions_losing_context": len(context.lost),
        "context_losses": context.lost[:10],
        "compaction_entries": compactions,
        "runs_told_waiting": told,
        "run_outcomes": dict(outcomes),
        "waiting_runs_lost_without_restart_code": runs_lost,
        "cron_runs": cron_runs,
        "cron_statuses": dict(statuses),
        "cron_runs_stuck_running": stuck,
        "cron_slots_started_twice": twice,
        "sessions_failing_after_restart": driver.failed_after_restart,
    }


def main() -> int:
    # A request cut off by a kill makes the model server log a disconnect: expected here.
    for name in ("uvicorn.error", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=110)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    r = campaign(args.kills, args.seed)
    zero = (
        "acknowledged_replies_lost",
        "sessions_losing_context",
        "waiting_runs_lost_without_restart_code",
        "cron_runs_stuck_running",
        "cron_slots_started_twice",
    )
    rows = [
        ("SIGKILLs of the gateway", f"{r['kills']} ({r['killed_by']})", "≥ 100", r["kills"] >= 100),
        (
            "acknowledged replies (lost)",
            f"{r['acknowledged_replies']} ({r['acknowledged_replies_lost']})",
            "0 lost",
            r["acknowledged_replies_lost"] == 0,
        ),
        (
            "chat requests checked for context (losing it)",
            f"{r['chat_requests_checked']} ({r['sessions_losing_context']})",
            "0 losing",
            r["sessions_losing_context"] == 0,
        ),
        ("compaction entries written", str(r["compaction_entries"]), "-", None),
        (
            "runs told `waiting` (lost without a restart code)",
            f"{r['runs_told_waiting']} "
            f"({r['waiting_runs_lost_without_restart_code']}; {r['run_outcomes']})",
            "0 lost",
            r["waiting_runs_lost_without_restart_code"] == 0,
        ),
        (
            "cron runs (stuck `running`; slots started twice)",
            f"{r['cron_runs']} "
            f"({r['cron_runs_stuck_running']}; {r['cron_slots_started_twice']}; "
            f"{r['cron_statuses']})",
            "0; 0",
            r["cron_runs_stuck_running"] == 0 and r["cron_slots_started_twice"] == 0,
        ),
    ]
    print_table(rows)
    ok = all(r[key] == 0 for key in zero) and not r["sessions_failing_after_restart"]
    write_results(args.output, {"benchmark": "bad_day", "results": r, "all_zero": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
