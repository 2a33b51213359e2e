"""Builders shared by the provider tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from nodmix.messages import Message, user_message
from nodmix.providers.base import ModelEvent, ModelRequest, ModelSpec, TextDelta
from nodmix.tools.base import ToolSpec

READ_TOOL = ToolSpec(
    name="read",
    description="Read a file.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
)
LS_TOOL = ToolSpec(
    name="ls",
    description="List a directory.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def make_request(
    messages: Sequence[Message] | str = "hello",
    *,
    system: str = "You are terse.",
    tools: Sequence[ToolSpec] = (),
    model: str = "test-model",
    provider: str = "test",
    **kwargs: Any,
) -> ModelRequest:
    """A request with sensible defaults; a string becomes one user message."""
    if isinstance(messages, str):
        messages = [user_message(messages)]
    return ModelRequest(
        model=ModelSpec(provider=provider, id=model),
        system=system,
        messages=list(messages),
        tools=list(tools),
        **kwargs,
    )


async def text_until_error(events: AsyncIterator[ModelEvent], sink: list[str]) -> None:
    """Append streamed text to `sink`; what arrived before an error stays in `sink`."""
    async for event in events:
        if isinstance(event, TextDelta):
            sink.append(event.text)  # noqa: PERF401 - a comprehension would lose it on error
