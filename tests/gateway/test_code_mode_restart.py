"""A suspended code-mode run survives `kill -9` of the gateway: after a restart, `wait` with its
runId continues the program, which sees the tool call that was in flight fail with
`interrupted by restart`. A run whose turn a stopping gateway cancels is kept for the next start
too."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply, ModelStall
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import GatewayProcess, run_nodmix, wait_until, workspace_file

pytestmark = pytest.mark.integration

TOKEN = "restart-token-7"

HOLD_PLUGIN = """
import anyio
from nodmix.plugins import Plugin
from nodmix.tools import ToolResult

async def hold(args, ctx):
    (ctx.workspace / "hold-started").write_text("yes")
    await anyio.sleep_forever()
    return ToolResult.text("never")

def register(api):
    api.tool(name="hold", description="Waits until the process stops (test tool).")(hold)

plugin = Plugin(id="holder", name="Holder", register=register)
"""

PROGRAM = """
const note = await tools.read({ path: "notes.txt" });
try {
  const held = await tools.hold({});
  return { note: note.text.trim(), held: held.text };
} catch (e) {
  return { note: note.text.trim(), caught: e.message };
}
"""


class CodeModeModel:
    """`start` runs PROGRAM with exec; `resume <runId>` calls wait; a tool result is answered
    with a short text and kept in `results` (the structured exec/wait result)."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    def __call__(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            result = json.loads(last.text)
            self.results.append(result)
            return ModelReply.text(f"status {result['status']}")
        words = last.text.split()
        if words and words[0] == "resume":
            return ModelReply.tool_call("wait", {"runId": words[1]})
        return ModelReply.tool_call("exec", {"code": PROGRAM})


def _configure(state: Path, base_url: str) -> None:
    plugin = state / "holder.py"
    plugin.write_text(HOLD_PLUGIN, encoding="utf-8")
    provider = (
        f"local: {{ api: 'openai-completions', baseUrl: '{base_url}', apiKey: 'sk-test', "
        "models: [{ id: 'scripted', contextWindow: 32000, maxTokens: 2048 }] }"
    )
    (state / "nodmix.json").write_text(
        f"{{ models: {{ providers: {{ {provider} }} }}, "
        "agents: { defaults: { model: { primary: 'local/scripted' } } }, "
        "tools: { codeMode: { enabled: true, timeoutMs: 1000 } }, "
        f"plugins: {{ load: {{ paths: ['{plugin}'] }} }} }}",
        encoding="utf-8",
    )


def _turn(state: Path, gateway: GatewayProcess, message: str, *extra: str) -> None:
    done = run_nodmix(
        state, "agent", "-m", message, "--json", "--url", gateway.url, "--token", TOKEN, *extra
    )
    assert done.returncode == 0, done.stderr + gateway.stderr_so_far()


def test_a_waiting_run_continues_after_the_gateway_is_killed_and_started_again(
    isolated_state: Path,
) -> None:
    state = isolated_state
    workspace_file(state, "notes.txt", "Ferry at 9:40.\n")
    model = CodeModeModel()
    with ScriptedModelServer(model) as server:
        _configure(state, server.base_url)
        with GatewayProcess(state, "--token", TOKEN) as gateway:
            _turn(state, gateway, "start")
            (parked,) = model.results
            assert parked["status"] == "waiting", parked
            run_file = state / "codemode" / "runs" / f"{parked['runId']}.run"
            wait_until(run_file.exists, what="the suspended run to be written")
            assert (state / "workspace" / "hold-started").exists()  # the call is in flight
            code, _ = gateway.stop(signal.SIGKILL)
        assert code == -signal.SIGKILL

        with GatewayProcess(state, "--token", TOKEN) as gateway:
            _turn(state, gateway, f"resume {parked['runId']}", "--session-key", "elsewhere")
            _turn(state, gateway, f"resume {parked['runId']}")
            code, stderr = gateway.stop()
    refused, done = model.results[1:]
    assert refused["status"] == "failed" and "different session" in refused["error"]
    assert done["status"] == "completed", done
    assert done["value"] == {"note": "Ferry at 9:40.", "caught": "interrupted by restart"}
    assert not run_file.exists()  # a completed run leaves the disk
    assert code == 0 and "Traceback" not in stderr


class StallAfterWaiting(CodeModeModel):
    """Like `CodeModeModel`, but the reply to a `waiting` result never comes: the turn is still
    running when the gateway is told to stop."""

    def __call__(self, request: ModelRequest) -> ModelReply | ModelStall:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage) and json.loads(last.text)["status"] == "waiting":
            self.results.append(json.loads(last.text))
            return ModelStall(mode="hang")
        return super().__call__(request)


def test_a_run_whose_turn_a_stopping_gateway_cancels_is_kept_for_the_next_start(
    isolated_state: Path,
) -> None:
    state = isolated_state
    workspace_file(state, "notes.txt", "Ferry at 9:40.\n")
    model = StallAfterWaiting()
    with ScriptedModelServer(model) as server:
        _configure(state, server.base_url)
        with GatewayProcess(state, "--token", TOKEN) as gateway:
            turn = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "nodmix",
                    "agent",
                    "-m",
                    "start",
                    "--url",
                    gateway.url,
                    "--token",
                    TOKEN,
                ],
                env=gateway.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            wait_until(lambda: bool(model.results), what="the waiting result to reach the model")
            (parked,) = model.results
            assert gateway.proc is not None
            # Exactly two signals: the first starts the graceful stop, the second cancels the
            # turn. A third, sent while the process is already exiting, would kill it outright.
            gateway.proc.send_signal(signal.SIGTERM)
            wait_until(
                lambda: "letting running turns finish" in gateway.stderr_so_far(),
                what="the graceful stop to begin",
            )
            gateway.proc.send_signal(signal.SIGTERM)
            code = gateway.proc.wait(timeout=30)
            _, stderr = gateway.stop()
            turn.wait(timeout=30)
        assert code == 0, stderr
        run_file = state / "codemode" / "runs" / f"{parked['runId']}.run"
        assert run_file.exists()  # kept for the next start, not aborted with its turn

        with GatewayProcess(state, "--token", TOKEN) as gateway:
            _turn(state, gateway, f"resume {parked['runId']}")
            gateway.stop()
    done = model.results[-1]
    assert done["status"] == "completed", done
    assert done["value"] == {"note": "Ferry at 9:40.", "caught": "interrupted by restart"}
