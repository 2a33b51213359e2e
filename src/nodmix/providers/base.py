"""The provider seam: one streaming method per model API, folded by `collect()`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, Protocol, TypeAlias

import msgspec

from nodmix.messages import (
    AssistantBlock,
    AssistantMessage,
    JsonObject,
    Message,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)
from nodmix.tools.base import ToolSpec

ProviderAPI: TypeAlias = Literal["openai-completions", "anthropic-messages"]


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A model a provider serves, with the limits the runtime plans around."""

    provider: str
    id: str
    name: str | None = None
    context_window: int = 128_000
    max_tokens: int = 8_192

    @property
    def ref(self) -> str:
        """`provider/model`, the form used in config and on the command line."""
        return f"{self.provider}/{self.id}"


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one model call needs, in Nodmix's own terms."""

    model: ModelSpec
    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    expected_tool_names: frozenset[str] | None = None
    """When set (code mode), the adapter checks the final payload carries exactly these tool
    names and refuses to send anything else: the surface fails closed."""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    """Vendor-specific knobs, namespaced by the adapter that reads them."""


class TextDelta(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of answer text."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


class ThinkingDelta(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of reasoning text."""

    text: str
    signature: str | None = None
    kind: Literal["thinking_delta"] = "thinking_delta"


class ToolCallEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A complete tool call (adapters assemble streamed argument fragments first)."""

    id: str
    name: str
    arguments: JsonObject
    kind: Literal["tool_call"] = "tool_call"


class UsageEvent(msgspec.Struct, frozen=True, kw_only=True):
    """Token usage for the response (may arrive more than once; the last one wins)."""

    usage: Usage
    kind: Literal["usage"] = "usage"


class ResponseDone(msgspec.Struct, frozen=True, kw_only=True):
    """The end of the stream."""

    stop_reason: StopReason
    kind: Literal["done"] = "done"


ModelEvent: TypeAlias = TextDelta | ThinkingDelta | ToolCallEvent | UsageEvent | ResponseDone


class Provider(Protocol):
    """Adapter for one model API endpoint. Owns its HTTP client; close it with `aclose()`.

    `stream()` raises `nodmix.errors.ProviderError` subclasses; it never leaks SDK or HTTP
    library exceptions.
    """

    @property
    def name(self) -> str: ...

    @property
    def api(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...

    async def aclose(self) -> None: ...


class ResponseBuilder:
    """Folds model events into one `AssistantMessage`."""

    def __init__(self) -> None:
        self._blocks: list[AssistantBlock] = []
        self._usage = Usage()
        self._stop: StopReason = "stop"
        self._done = False

    def add(self, event: ModelEvent) -> None:
        """Fold one event."""
        if isinstance(event, TextDelta):
            last = self._blocks[-1] if self._blocks else None
            if isinstance(last, TextBlock):
                self._blocks[-1] = TextBlock(text=last.text + event.text)
            else:
                self._blocks.append(TextBlock(text=event.text))
        elif isinstance(event, ThinkingDelta):
            last = self._blocks[-1] if self._blocks else None
            if isinstance(last, ThinkingBlock):
                signature = event.signature or last.thinking_signature
                self._blocks[-1] = ThinkingBlock(
                    thinking=last.thinking + event.text, thinking_signature=signature
                )
            else:
                self._blocks.append(
                    ThinkingBlock(thinking=event.text, thinking_signature=event.signature)
                )
        elif isinstance(event, ToolCallEvent):
            call = ToolCallBlock(id=event.id, name=event.name, arguments=event.arguments)
            self._blocks.append(call)
        elif isinstance(event, UsageEvent):
            self._usage = event.usage
        else:
            self._stop = event.stop_reason
            self._done = True

    @property
    def done(self) -> bool:
        """Whether `ResponseDone` was seen."""
        return self._done

    def message(self, *, provider: str, model: str, api: str) -> AssistantMessage:
        """The assistant message so far. A response with tool calls stops with `toolUse`."""
        blocks = tuple(self._blocks)
        stop = self._stop
        if stop == "stop" and any(isinstance(b, ToolCallBlock) for b in blocks):
            stop = "toolUse"
        return AssistantMessage(
            content=blocks,
            provider=provider,
            model=model,
            api=api,
            usage=self._usage,
            stop_reason=stop,
        )


async def collect(provider: Provider, request: ModelRequest) -> AssistantMessage:
    """Run a request to completion and return the assistant message."""
    builder = ResponseBuilder()
    async for event in provider.stream(request):
        builder.add(event)
    return builder.message(provider=provider.name, model=request.model.id, api=provider.api)
