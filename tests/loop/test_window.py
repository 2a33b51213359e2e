"""A user message that cannot fit the model's window is refused before anything is sent."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nodmix.errors import PromptTooLargeError
from nodmix.loop.window import ensure_prompt_fits
from nodmix.messages import user_message
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.sessions import MessageEntry
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.tools.base import ToolSpec

from ..context.runtime_support import write_config

pytestmark = pytest.mark.anyio

BIG_TOOL = ToolSpec(name="lookup", description="d" * 4000, parameters={"type": "object"})


def test_a_message_that_fits_the_window_passes() -> None:
    ensure_prompt_fits(
        user_message("x" * 3_900), context_window=1_000, tools=[], model="local/scripted"
    )


def test_a_message_larger_than_the_window_is_refused_with_the_numbers() -> None:
    with pytest.raises(PromptTooLargeError) as refused:
        ensure_prompt_fits(
            user_message("x" * 40_000), context_window=1_000, tools=[], model="local/scripted"
        )
    assert refused.value.context_window == 1_000 and refused.value.tokens > 10_000
    message = str(refused.value)
    assert "local/scripted holds 1,000" in message and "about 10,004 tokens" in message


def test_tool_definitions_count_against_the_window() -> None:
    text = "x" * 3_600  # ~900 tokens: fits alone, not next to a ~1,000-token tool definition
    ensure_prompt_fits(user_message(text), context_window=1_000, tools=[], model="m")
    with pytest.raises(PromptTooLargeError, match="tool definitions"):
        ensure_prompt_fits(user_message(text), context_window=1_000, tools=[BIG_TOOL], model="m")


async def test_runtime_refuses_before_recording_or_calling_the_model(isolated_state: Path) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        return ModelReply.text("answered")

    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, window=32_000)
        async with Runtime.open() as runtime:
            with anyio.fail_after(10):
                await runtime.run_turn("hello", session_key="big")
                with pytest.raises(PromptTooLargeError, match="context window"):
                    await runtime.run_turn("y" * 200_000, session_key="big")
                after = await runtime.run_turn("still there?", session_key="big")
            session = runtime.open_session(runtime.agent(), "big")
    assert after.result.reply == "answered"
    assert len(server.requests) == 2  # the refused message never reached the model
    users = [
        e.message
        for e in session.entries
        if isinstance(e, MessageEntry) and e.message.role == "user"
    ]
    assert [m.text for m in users] == ["hello", "still there?"]
