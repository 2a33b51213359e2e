"""The optional engine members the loop and runtime call: bootstrap, ingest_batch, after_turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.context.base import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    CompactParams,
    CompactResult,
    ContextEngineInfo,
    IngestBatchParams,
    IngestParams,
)
from nodmix.context.lifecycle import Bootstrapper
from nodmix.context.tokens import estimate_tokens
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.tools import FunctionTool, ToolContext, ToolResult

from .harness import Harness

pytestmark = pytest.mark.anyio


class Recording:
    info = ContextEngineInfo(id="rec", name="Recording")

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.batches: list[IngestBatchParams] = []

    async def bootstrap(self, params: BootstrapParams) -> None:
        self.calls.append(f"bootstrap:{len(params.messages)}")

    async def ingest(self, params: IngestParams) -> None:
        self.calls.append("ingest")

    async def ingest_batch(self, params: IngestBatchParams) -> None:
        self.calls.append("ingest_batch")
        self.batches.append(params)

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        return AssembleResult(
            messages=params.messages, estimated_tokens=estimate_tokens(params.messages)
        )

    async def compact(self, params: CompactParams) -> CompactResult:
        return CompactResult(ok=True, compacted=False)

    async def after_turn(self, params: AfterTurnParams) -> None:
        self.calls.append(f"after_turn:{len(params.messages)}")


def respond(request: ModelRequest) -> ModelReply:
    if not any(isinstance(m, ToolResultMessage) for m in request.messages):
        return ModelReply.tool_call("ping", {})
    return ModelReply.text("pong received")


async def test_a_batch_engine_gets_the_whole_turn_once_and_then_after_turn(
    isolated_state: Path,
) -> None:
    async def ping(args: dict[str, object], ctx: ToolContext) -> ToolResult:
        return ToolResult.text("pong")

    engine = Recording()
    h = Harness(
        isolated_state,
        respond,
        engine=engine,
        tools=[FunctionTool.create(ping, name="ping", description="ping")],
    )
    await Bootstrapper().bootstrap(engine, h.session)
    await h.turn("ping please")
    assert engine.calls == ["bootstrap:0", "ingest_batch", "after_turn:4"]
    (batch,) = engine.batches
    assert [m.role for m in batch.messages] == ["user", "assistant", "toolResult", "assistant"]


async def test_bootstrap_runs_once_per_engine_and_session(isolated_state: Path) -> None:
    engine = Recording()
    h = Harness(isolated_state, respond, engine=engine)
    boot = Bootstrapper()
    await boot.bootstrap(engine, h.session)
    await boot.bootstrap(engine, h.session)
    assert engine.calls == ["bootstrap:0"]
