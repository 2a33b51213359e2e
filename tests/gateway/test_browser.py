"""The web page in real headless Chromium: login, streaming, sessions, tool calls, code cells.

Needs Debian's `chromium` (`scripts/ensure-chromium.sh`) and `playwright-core` in node_modules
(`npm ci`); `make test` provides both. Missing either is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from nodmix.messages import ToolResultMessage, UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer
from tests.gateway.support import TOKEN, socket_gateway, workspace_file, write_config

pytestmark = [pytest.mark.browser, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
SPEC = Path(__file__).parent / "browser" / "chat.spec.mjs"

PROGRAM = """const note = await tools.call("read", { path: "notes.txt" });
text("read the note");
return { first: note.text.split(" ")[0] };"""

PAUSING_PROGRAM = """text("before the pause");
await yield_control("checkpoint");
return "resumed";"""


def browser_model(request: ModelRequest) -> ModelReply:
    """Code-mode agents run a program (and resume it while it waits); others read files."""
    exec_tool = next((t for t in request.tools if t.name == "exec"), None)
    if exec_tool is None or "code" not in exec_tool.parameters.get("properties", {}):
        return tool_then_answer(request)
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        result = json.loads(last.text)
        if result["status"] == "waiting":
            return ModelReply.tool_call("wait", {"runId": result["runId"]})
        return ModelReply.text(f"The program ended: {result['status']}.")
    prompt = last.text if isinstance(last, UserMessage) else ""
    return ModelReply.tool_call("exec", {"code": PAUSING_PROGRAM if "pause" in prompt else PROGRAM})


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _requirements() -> tuple[str, str]:
    node = shutil.which("node")
    chromium = shutil.which("chromium")
    if node is None:
        pytest.fail("node is not installed; the browser test needs Node.js")
    if chromium is None:
        pytest.fail("Debian chromium is missing: run scripts/ensure-chromium.sh (make browser)")
    if not (ROOT / "node_modules" / "playwright-core").is_dir():
        pytest.fail("node_modules/playwright-core is missing: run `npm ci` (make node)")
    return node, chromium


def test_chat_page_streams_switches_sessions_and_renders_tools_in_chromium(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    node, chromium = _requirements()
    write_config(
        isolated_state,
        model_server.base_url,
        agents="list: [{ id: 'main' }, { id: 'coder', tools: { codeMode: { enabled: true } } }, "
        "{ id: 'offline', model: 'offline/none' }]",
        providers=f"offline: {{ api: 'openai-completions', "
        f"baseUrl: 'http://127.0.0.1:{_closed_port()}/v1', models: [{{ id: 'none' }}] }}",
    )
    workspace_file(isolated_state, "notes.txt", "The ferry leaves at 9:40.")
    (isolated_state / "workspaces" / "coder").mkdir(parents=True)
    (isolated_state / "workspaces" / "coder" / "notes.txt").write_text(
        "The cell read this.", encoding="utf-8"
    )
    model_server.respond = browser_model
    with socket_gateway() as gateway:
        done = subprocess.run(
            [node, str(SPEC)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={
                **os.environ,
                "GATEWAY_URL": gateway.url,
                "GATEWAY_TOKEN": TOKEN,
                "CHROMIUM_PATH": chromium,
            },
            check=False,
        )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count(" ok\n") == 15, done.stdout
