"""A code-mode program whose nested shell commands need approval, through a real gateway and
the real QuickJS sandbox: `exec` returns `waiting` with reason `approval`, the commands are
asked as one batch, and `wait` completes the program once they are answered."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.gateway.client import GatewayClient
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, poll_until, socket_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PROGRAM = """
const [a, b] = await Promise.all([
  tools.call('nodmix:core:exec', { command: 'echo first' }),
  tools.call('nodmix:core:exec', { command: 'echo second' }),
]);
return [a.text.split('\\n')[0], b.text.split('\\n')[0]];
"""
RUN_ID = re.compile(r"cm_[0-9a-f]{32}")


class ApprovalModel:
    """Runs PROGRAM; on a `waiting` result calls `wait`; then answers with the last result."""

    def __init__(self) -> None:
        self.results: list[str] = []

    def __call__(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if not isinstance(last, ToolResultMessage):
            return ModelReply.tool_call("exec", {"code": PROGRAM})
        self.results.append(last.text)
        found = RUN_ID.search(last.text)
        if '"waiting"' in last.text and found is not None:
            return ModelReply.tool_call("wait", {"runId": found.group(0)})
        return ModelReply.text(f"cell said: {last.text[:300]}")


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(ApprovalModel()) as server:
        yield server


@pytest.fixture(autouse=True, scope="module")
def _sandbox_runtime_installed() -> None:
    from nodmix.sandbox import status

    report = status()
    if not report.installed:
        pytest.fail(f"the QuickJS-WASI runtime is not installed: {report.hint}")


def _outer_results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["result"]["details"]
        for e in events
        if e["kind"] == "tool_finished" and e.get("parentCallId") is None
    ]


async def test_nested_exec_needing_approval_suspends_and_wait_completes_after_approval(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(
        isolated_state,
        model_server.base_url,
        "tools: { codeMode: { enabled: true }, exec: { security: 'allowlist', ask: 'on-miss' } }",
    )
    model = ApprovalModel()
    model_server.respond = model
    events: list[dict[str, Any]] = []
    approvals: list[dict[str, Any]] = []
    answer: dict[str, Any] = {}
    with socket_gateway() as gateway:
        async with (
            GatewayClient.connect(gateway.url, token=TOKEN) as client,
            anyio.create_task_group() as tg,
        ):
            client.listen("approval", approvals.append)

            async def turn() -> None:
                answer.update(
                    await client.request("agent", {"message": "go"}, on_event=events.append)
                )

            tg.start_soon(turn)

            async def suspended() -> bool:
                return bool(_outer_results(events))

            await poll_until(suspended, what="the program to suspend", timeout=30)
            first = _outer_results(events)[0]
            assert first["status"] == "waiting" and first["reason"] == "approval"
            assert len(first["pendingToolCalls"]) == 2
            # the run is parked like any suspended run: its file is written to the state dir
            runs_dir = isolated_state / "codemode" / "runs"

            async def stored() -> bool:
                return any(runs_dir.glob("cm_*"))

            await poll_until(stored, what="the suspended run's file")

            async def presented() -> bool:
                return any(e["kind"] == "approval_requested" for e in approvals)

            await poll_until(presented, what="the approval batch")
            batches = [e for e in approvals if e["kind"] == "approval_requested"]
            assert len(batches) == 1, approvals
            commands = sorted(r["command"] for r in batches[0]["requests"])
            assert commands == ["echo first", "echo second"]
            for request in batches[0]["requests"]:
                await client.request(
                    "approvals.resolve", {"id": request["id"], "decision": "allow-once"}
                )
    final = _outer_results(events)[-1]
    assert final["status"] == "completed", final
    assert final["value"] == ["first", "second"]
    assert answer["reply"].startswith("cell said:")
    nested = [e for e in events if e["kind"] == "tool_finished" and e.get("parentCallId")]
    assert len(nested) == 2 and not any(e["result"]["isError"] for e in nested)
