"""Turns on one session from several processes: a running gateway and ten `--local` CLIs.

Every process is real (`nodmix gateway`, `nodmix agent --local`), and so is the model: a
scripted server that echoes the prompt after a short latency (a model takes time to answer,
which is when turns of different processes used to interleave). The transcript must come out
as one linear chain of user/reply pairs, and the model must never have seen two turns of the
session at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import httpx2
import pytest

from nodmix.config.paths import sessions_dir
from nodmix.messages import AssistantMessage, UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.sessions.entries import MessageEntry
from nodmix.sessions.transcript import Transcript
from nodmix.sessions.turn_lock import hold_file_lock, lock_path
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import last_user_text
from tests.gateway.support import GatewayProcess, write_config

pytestmark = pytest.mark.integration

TOKEN = "lock-token-0123"
CLIS = 10
GATEWAY_TURNS = 10
KEY = "agent:main:shared"


class SlowEcho:
    """Echoes the last user text after `latency` seconds, counting turns in flight."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    async def __call__(self, request: ModelRequest) -> ModelReply:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await anyio.sleep(self.latency)  # the model's latency, not a wait for an event
            return ModelReply.text(last_user_text(request) or "(none)")
        finally:
            with self._lock:
                self.in_flight -= 1


def _cli(state: Path, index: int) -> subprocess.Popen[str]:
    env_args = [sys.executable, "-m", "nodmix", "agent", "--local", "--session-key", "shared"]
    return subprocess.Popen(
        [*env_args, "-m", f"cli {index}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(state),
    )


def _env(state: Path) -> dict[str, str]:
    return {
        **os.environ,
        "NODMIX_STATE_DIR": str(state),
        "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
    }


def _transcript(state: Path) -> list[MessageEntry]:
    sessions = state / "agents" / "main" / "sessions"
    store = json.loads((sessions / "sessions.json").read_text(encoding="utf-8"))
    transcript = Transcript.load(sessions / store[KEY]["sessionFile"])
    entries = list(transcript.entries)
    assert [e.parent_id for e in entries] == [None, *(e.id for e in entries[:-1])]
    assert all(isinstance(e, MessageEntry) for e in entries)
    return [e for e in entries if isinstance(e, MessageEntry)]


def test_ten_local_clis_and_a_gateway_on_one_session_leave_one_linear_transcript(
    isolated_state: Path,
) -> None:
    model = SlowEcho(latency=0.03)
    with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        with GatewayProcess(isolated_state, "--token", TOKEN) as gateway:
            gateway_errors: list[str] = []

            def gateway_turns() -> None:
                headers = {"authorization": f"Bearer {TOKEN}"}
                with httpx2.Client(base_url=gateway.url, headers=headers, timeout=120) as client:
                    for index in range(GATEWAY_TURNS):
                        text = f"gateway {index}"
                        body = {
                            "model": "nodmix",
                            "user": "shared",
                            "messages": [{"role": "user", "content": text}],
                        }
                        response = client.post("/v1/chat/completions", json=body)
                        reply = response.json()
                        if response.status_code != 200:
                            gateway_errors.append(response.text)
                        elif reply["choices"][0]["message"]["content"] != text:
                            gateway_errors.append(f"wrong reply to {text}: {response.text}")

            thread = threading.Thread(target=gateway_turns)
            thread.start()
            clis = [_cli(isolated_state, index) for index in range(CLIS)]
            outputs = [proc.communicate(timeout=120) for proc in clis]
            thread.join(120)
            assert not thread.is_alive()
            code, stderr = gateway.stop()
    for index, (proc, (out, err)) in enumerate(zip(clis, outputs, strict=True)):
        assert proc.returncode == 0, err
        assert out.strip() == f"cli {index}"
        assert "Traceback" not in err
    assert gateway_errors == []
    assert code == 0 and "Traceback" not in stderr
    assert model.most_in_flight == 1
    messages = _transcript(isolated_state)
    assert len(messages) == 2 * (CLIS + GATEWAY_TURNS)
    prompts = []
    for asked, answered in zip(messages[::2], messages[1::2], strict=True):
        assert isinstance(asked.message, UserMessage)
        assert isinstance(answered.message, AssistantMessage)
        assert answered.message.text == asked.message.text
        prompts.append(asked.message.text)
    expected = {f"cli {i}" for i in range(CLIS)} | {f"gateway {i}" for i in range(GATEWAY_TURNS)}
    assert set(prompts) == expected


def test_a_cli_waiting_for_another_process_says_so_on_stderr_then_runs(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(SlowEcho(latency=0)) as server:
        write_config(isolated_state, server.base_url)
        path = lock_path(sessions_dir(isolated_state, "main"), KEY)
        lines: list[str] = []

        async def hold_until_the_cli_waits() -> subprocess.Popen[str]:
            async with hold_file_lock(path, KEY, timeout=10):
                proc = _cli(isolated_state, 0)
                assert proc.stderr is not None
                with anyio.fail_after(60):
                    while not lines:  # the CLI's first stderr line: it is waiting
                        line = await anyio.to_thread.run_sync(proc.stderr.readline)
                        assert line, "the CLI ended without waiting"
                        lines.append(line.rstrip("\n"))
            return proc

        proc = anyio.run(hold_until_the_cli_waits)
        out, err = proc.communicate(timeout=60)
    assert lines == [f"waiting for another turn on session {KEY} (pid {os.getpid()})…"]
    assert proc.returncode == 0 and out.strip() == "cli 0" and err == ""
