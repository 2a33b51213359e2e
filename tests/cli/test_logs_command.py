"""`nodmix logs` as an operator runs it: following a turn live, filters, Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer
from tests.gateway.support import (
    DEADLINE_S,
    GatewayProcess,
    run_nodmix,
    workspace_file,
    write_config,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def configured(isolated_state: Path) -> Iterator[Path]:
    with ScriptedModelServer(tool_then_answer) as server:
        write_config(isolated_state, server.base_url)
        yield isolated_state


class Follower:
    """`nodmix logs -f --json` in a subprocess, its lines on a queue."""

    def __init__(self, state: Path) -> None:
        env = {
            **os.environ,
            "NODMIX_STATE_DIR": str(state),
            "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodmix", "logs", "-f", "--json", "-n", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C: the exit code and what was written to stderr."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=DEADLINE_S)
        self.pump.join(DEADLINE_S)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        stderr = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, stderr

    def until(self, msg_prefix: str) -> list[dict[str, Any]]:
        """Records up to and including the first whose message starts with `msg_prefix`."""
        out: list[dict[str, Any]] = []
        while True:
            record = json.loads(self.lines.get(timeout=DEADLINE_S))
            out.append(record)
            if str(record["msg"]).startswith(msg_prefix):
                return out


def test_logs_follow_shows_a_turn_as_it_happens_and_exits_zero_on_ctrl_c(
    configured: Path,
) -> None:
    workspace_file(configured, "notes.txt", "The ferry leaves at 9:40.")
    with GatewayProcess(configured) as gateway:
        follower = Follower(configured)
        try:
            # The first turn may start before the follower opened the file; the second turn
            # is only sent once the first was seen, so it is followed from its start.
            run_nodmix(configured, "agent", "-m", "hello", "--url", gateway.url)
            follower.until("turn finished")
            done = run_nodmix(configured, "agent", "-m", "read notes.txt", "--url", gateway.url)
            records = follower.until("turn finished")
        finally:
            code, stderr = follower.interrupt()
        gateway.stop()
    assert done.returncode == 0 and "9:40" in done.stdout
    messages = [r["msg"] for r in records]
    assert messages[0].startswith("turn started")
    assert "tool call read" in messages
    assert any(m.startswith("tool read done") for m in messages)
    assert messages[-1].startswith("turn finished: stop after 2 step(s)")
    assert {r["runId"] for r in records} == {records[0]["runId"]}
    assert {r["pid"] for r in records} == {gateway.proc.pid if gateway.proc else None}
    assert code == 0 and "Traceback" not in stderr


def test_logs_filter_by_level_and_time_and_print_plain_text(configured: Path) -> None:
    run_nodmix(configured, "agent", "--local", "-m", "hello")
    info = run_nodmix(configured, "logs")
    errors = run_nodmix(configured, "logs", "--level", "error")
    later = run_nodmix(configured, "logs", "--since", "2999-01-01T00:00:00+00:00")
    bad = run_nodmix(configured, "logs", "--since", "last tuesday")
    assert info.returncode == 0
    assert "nodmix.turns: turn started (model local/scripted)" in info.stdout
    assert "runId=run_" in info.stdout
    assert errors.returncode == 0 and errors.stdout == ""
    assert later.returncode == 0 and later.stdout == ""
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "--since 'last tuesday'" in bad.stderr
