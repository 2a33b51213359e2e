"""The loop stops for calls of deferred (app-run) tools and continues from their results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.context.legacy import LegacyContextEngine
from nodmix.hooks import Hooks
from nodmix.loop import RunTools, TurnDeps, TurnRequest, run_turn
from nodmix.messages import TextBlock, ToolResultMessage, user_message
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import FunctionProvider, ModelReply, ReplyToolCall
from nodmix.sessions import MessageEntry, Session
from nodmix.tools import FunctionTool, ToolContext, ToolOrigin, ToolResult, ToolSpec
from nodmix.tools.deferred import DeferredTool
from nodmix.tools.executor import ToolExecutor

from .test_turn import Resolver, _agent, _session

PICK = DeferredTool(
    spec=ToolSpec(name="pick_file", description="Ask the user for a file.", parameters={}),
    origin=ToolOrigin(source="client", owner="app", name="pick_file"),
)


async def _clock(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult.text("09:40")


CLOCK = FunctionTool.create(_clock, name="clock", description="The time.")


def respond(request: ModelRequest) -> ModelReply:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    if not results:
        return ModelReply(
            tool_calls=(ReplyToolCall("clock", id="c1"), ReplyToolCall("pick_file", id="c2"))
        )
    return ModelReply.text(" + ".join(r.text for r in results))


async def _run(state: Path, session: Session, *, resume: tuple[ToolResultMessage, ...] = ()) -> Any:
    deps = TurnDeps(
        models=Resolver({"p/m": FunctionProvider(respond)}),
        executor=ToolExecutor(Hooks()),
        context=LegacyContextEngine(),
    )
    request = TurnRequest(
        agent=_agent(state / "ws"),
        session=session,
        prompt=None if resume else user_message("which file?"),
        resume=resume,
        run_id="run",
        tools=RunTools(visible=(CLOCK, PICK)),
        model_refs=("p/m",),
    )
    return await run_turn(deps, request, lambda event: None)


def _recorded(session: Session) -> list[str]:
    return [e.message.role for e in session.entries if isinstance(e, MessageEntry)]


@pytest.mark.anyio
async def test_a_deferred_call_stops_the_turn_after_the_agents_own_calls_ran(
    isolated_state: Path,
) -> None:
    session = _session(isolated_state)
    result = await _run(isolated_state, session)
    assert result.stop_reason == "tool_calls" and result.steps == 1
    assert [(c.id, c.name) for c in result.client_calls] == [("c2", "pick_file")]
    # The clock result is recorded; pick_file has none until the app sends it.
    assert _recorded(session) == ["user", "assistant", "toolResult"]

    answer = ToolResultMessage(
        tool_call_id="c2",
        tool_name="pick_file",
        content=(TextBlock(text="notes.txt"),),
        is_error=False,
    )
    final = await _run(isolated_state, session, resume=(answer,))
    assert final.stop_reason == "stop" and final.reply == "09:40 + notes.txt"
    assert _recorded(session) == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
    ]
