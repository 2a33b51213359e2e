"""A waiting code-mode run survives `kill -9` at every step of parking and resuming it.

`nodmix agent --local` runs a program whose tool call outlasts the step (`exec` answers
`waiting`), and the scripted model calls `wait` at once. The process kills itself
(`NODMIX_CRASH_AT`, a real SIGKILL) at one step:

- `codemode.park-saved`: the run file is written, `waiting` not yet returned;
- `codemode.result-recorded@1`: `waiting` is in the transcript, the model not yet asked;
- `codemode.resume-taken`: `wait` took the run out of the store to continue it;
- `codemode.resume-finished`: the program completed, its result not yet returned;
- `codemode.result-recorded@2`: the completed result is in the transcript.

Then a new process resumes the run with `wait`: it completes (the tool call that was in flight
at the kill reaches the program as `interrupted by restart`), never `invalid_input`. Once the
result is in the transcript, the run file is gone.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.sessions import SessionManager
from nodmix.sessions.entries import MessageEntry
from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

pytestmark = pytest.mark.integration

NAP_PLUGIN = """
import anyio
from nodmix.plugins import Plugin
from nodmix.tools import ToolResult

async def nap(args, ctx):
    await anyio.sleep(1.3)
    return ToolResult.text("rested")

def register(api):
    api.tool(name="nap", description="Answers after 1.3 s (test tool).")(nap)

plugin = Plugin(id="napper", name="Napper", register=register)
"""

PROGRAM = """
const note = await tools.read({ path: "notes.txt" });
let rest;
try {
  rest = { nap: (await tools.nap({})).text };
} catch (e) {
  rest = { caught: e.message };
}
const again = await tools.read({ path: "notes.txt" });  // the continuing step calls tools too
return { note: note.text.trim(), same: again.text === note.text, ...rest };
"""


def respond(request: ModelRequest) -> ModelReply:
    """`start` runs PROGRAM; a `waiting` result is answered with `wait`; `resume <id>` waits."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        result = json.loads(last.text)
        if result["status"] == "waiting":
            return ModelReply.tool_call("wait", {"runId": result["runId"]})
        return ModelReply.text(f"status {result['status']}")
    words = last.text.split()
    if words and words[0] == "resume":
        return ModelReply.tool_call("wait", {"runId": words[1]})
    return ModelReply.tool_call("exec", {"code": PROGRAM})


def _configure(state: Path, base_url: str) -> None:
    plugin = state / "napper.py"
    plugin.write_text(NAP_PLUGIN, encoding="utf-8")
    workspace = state / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("Ferry at 9:40.\n", encoding="utf-8")
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": base_url,
                    "apiKey": "sk-test",
                    "models": [{"id": "scripted", "contextWindow": 32000, "maxTokens": 2048}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        "tools": {"codeMode": {"enabled": True, "timeoutMs": 1000}},
        "plugins": {"load": {"paths": [str(plugin)]}},
    }
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


def _results(state: Path) -> list[dict[str, Any]]:
    """The `exec`/`wait` results in the main session's transcript, in order."""
    session = SessionManager(state, read_only=True).open("agent:main:main")
    out = []
    for entry in session.entries:
        if isinstance(entry, MessageEntry) and entry.parent_tool_call_id is None:
            message = entry.message
            if isinstance(message, ToolResultMessage) and isinstance(message.details, dict):
                out.append(message.details)
    return out


def _run_files(state: Path) -> list[Path]:
    runs = state / "codemode" / "runs"
    return sorted(runs.glob("*.run")) if runs.is_dir() else []


@pytest.mark.parametrize(
    ("point", "nap_finished"),
    [
        ("codemode.park-saved", False),
        ("codemode.result-recorded@1", False),
        ("codemode.resume-taken", True),
        ("codemode.resume-finished", True),
    ],
)
def test_a_run_killed_while_waiting_or_resuming_completes_after_a_restart(
    isolated_state: Path, point: str, nap_finished: bool
) -> None:
    state = isolated_state
    with ScriptedModelServer(respond) as server:
        _configure(state, server.base_url)
        killed = run_nodmix(
            state, "agent", "--local", "-m", "start", env={"NODMIX_CRASH_AT": point}
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        (run_file,) = _run_files(state)  # the run the model was (or was about to be) told of
        run_id = run_file.stem
        again = run_nodmix(state, "agent", "--local", "-m", f"resume {run_id}")
        assert again.returncode == 0, again.stderr
    done = _results(state)[-1]
    assert done["status"] == "completed", done
    value = done["value"]
    assert value["note"] == "Ferry at 9:40." and value["same"] is True
    if nap_finished:
        # Settled before the kill: kept if its result reached the run file, else reported.
        assert value.get("nap") == "rested" or value.get("caught") == "interrupted by restart"
    else:
        assert value["caught"] == "interrupted by restart"
    assert _run_files(state) == []  # the completed run left the disk


def test_a_kill_after_the_result_is_recorded_leaves_nothing_behind(isolated_state: Path) -> None:
    state = isolated_state
    with ScriptedModelServer(respond) as server:
        _configure(state, server.base_url)
        killed = run_nodmix(
            state,
            "agent",
            "--local",
            "-m",
            "start",
            env={"NODMIX_CRASH_AT": "codemode.result-recorded@2"},
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    waiting, done = _results(state)
    assert waiting["status"] == "waiting"
    assert done["status"] == "completed"
    assert done["value"] == {"note": "Ferry at 9:40.", "same": True, "nap": "rested"}
    assert _run_files(state) == []
