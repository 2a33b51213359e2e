"""The approval broker on its own: answers, timeouts, cancellation, batches, bounded state."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from nodmix.config.schema import ExecToolConfig, NodmixConfig, ToolsConfig
from nodmix.events import RunEvent
from nodmix.origin import TurnOrigin
from nodmix.security.allowlist import Allowlist
from nodmix.security.approvals import (
    MAX_PENDING,
    ApprovalBroker,
    ApprovalRequest,
    RecordingPresenter,
)
from nodmix.security.gate import ExecGate
from nodmix.security.parts import cached_rules
from nodmix.security.turns import TurnHandle, TurnRegistry
from nodmix.tools import core_tools
from nodmix.tools.base import ToolContext
from tests.gateway.support import poll_until

pytestmark = pytest.mark.anyio

CHANNEL = TurnOrigin(channel="test", chat_id="c1")


def _request(
    broker: ApprovalBroker, command: str, *, batch: str | None = None, seconds: float = 30
) -> ApprovalRequest:
    return ApprovalRequest(
        id=broker.new_id(),
        agent_id="main",
        session_key="agent:main:x",
        command=command,
        cwd="/tmp",
        reason="test",
        origin=CHANNEL,
        expires_at=time.time() + seconds,
        batch=batch,
    )


async def test_a_cancelled_wait_withdraws_the_request_and_says_so() -> None:
    broker = ApprovalBroker()
    heard: list[RunEvent] = []
    broker.listeners.append(heard.append)
    presenter = RecordingPresenter()
    broker.router.register("channel", presenter)
    async with anyio.create_task_group() as tg:
        broker.attach(tg)
        req = _request(broker, "sleep 1")
        tg.start_soon(broker.request, req, 30.0)

        async def asked() -> bool:
            return bool(broker.pending())

        await poll_until(asked, what="the request to be pending")
        tg.cancel_scope.cancel()
    assert broker.pending() == []
    assert req.outcome == "cancelled"
    assert getattr(heard[-1], "decision", None) == "cancelled"


async def test_requests_of_one_batch_are_presented_together() -> None:
    broker = ApprovalBroker()
    presenter = RecordingPresenter()
    broker.router.register("channel:test", presenter)
    outcomes: list[str] = []
    async with anyio.create_task_group() as tg:
        broker.attach(tg)

        async def ask(command: str) -> None:
            outcomes.append(await broker.request(_request(broker, command, batch="cell-1"), 30))

        for command in ("a", "b", "c"):
            tg.start_soon(ask, command)

        async def presented() -> bool:
            return bool(presenter.batches)

        await poll_until(presented, what="the batch")
        assert [r.command for r in presenter.batches[0].requests] == ["a", "b", "c"]
        for req in presenter.batches[0].requests:
            assert broker.resolve(req.id, "allow-once", by="test")
    assert outcomes == ["allow-once"] * 3 and len(presenter.batches) == 1


async def test_beyond_the_cap_requests_are_denied_at_once() -> None:
    broker = ApprovalBroker()
    async with anyio.create_task_group() as tg:
        broker.attach(tg)
        broker.router.register("channel", RecordingPresenter())
        for n in range(MAX_PENDING):
            tg.start_soon(broker.request, _request(broker, f"c{n}"), 30.0)

        async def full() -> bool:
            return len(broker.pending()) == MAX_PENDING

        await poll_until(full, what="the broker to fill up")
        assert await broker.request(_request(broker, "one more"), 30) == "deny"
        tg.cancel_scope.cancel()


async def test_an_unreadable_allowlist_fails_closed_with_a_line_naming_the_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "security").mkdir()
    (tmp_path / "security" / "exec-allowlist.json").write_text("{broken", encoding="utf-8")
    config = NodmixConfig(tools=ToolsConfig(exec=ExecToolConfig(security="allowlist")))
    turns = TurnRegistry()
    turns.add("run", "agent:main:x", TurnHandle(None))
    gate = ExecGate(
        rules_for=cached_rules(lambda: config),
        allowlist=Allowlist(tmp_path),
        broker=ApprovalBroker(),
        turns=turns,
    )
    from nodmix.hooks import Hooks
    from nodmix.tools.executor import ToolExecutor

    executor = ToolExecutor(Hooks())
    executor.gate = gate
    exec_tool = next(t for t in core_tools(ToolsConfig()) if t.spec.name == "exec")
    ctx = ToolContext(
        agent_id="main",
        session_key="agent:main:x",
        session_id="s",
        run_id="run",
        call_id="c",
        workspace=tmp_path,
    )
    marker = tmp_path / "ran"
    result = await executor.run(exec_tool, {"command": f"touch {marker}"}, ctx)
    assert result.is_error and not marker.exists()
    assert "exec-allowlist.json: cannot read the exec allowlist" in result.text_content
