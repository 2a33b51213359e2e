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
    input: tuple[str, ...] = ("text",)
    """What the model takes: `text`, and `image` for a vision model."""

    @property
    def sees_images(self) -> bool:
        """Whether image content may be sent to this model."""
        return "image" in self.input

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
    max_output_bytes: int | None = None
    """Cap on the reply's text, reasoning and tool-argument bytes; `None`: unlimited."""
    connect_timeout: float | None = None
    """Seconds to connect; `None`: the provider's setting."""
    idle_timeout: float | None = None
    """Seconds between stream events; `None`: the provider's setting."""
    tool_choice: str | None = None
    """`None`/`"auto"`: the model decides; `"required"`: it must call some tool; any other
    value: it must call the tool of that name."""


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
    cut_at_bytes: int | None = None
    """Set when the adapter stopped the stream at `ModelRequest.max_output_bytes`."""
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
    """Folds model events into one `AssistantMessage`.

    Text and reasoning deltas are kept as lists of pieces and joined once per block, so
    folding a reply is linear in its size however many deltas it arrives in.
    """

    def __init__(self) -> None:
        self._blocks: list[AssistantBlock | list[str]] = []
        self._kinds: list[str] = []
        self._signatures: dict[int, str | None] = {}
        self._usage = Usage()
        self._stop: StopReason = "stop"
        self._done = False
        self.cut_at_bytes: int | None = None
        """Set when the adapter stopped the reply at the output byte cap."""

    def add(self, event: ModelEvent) -> None:
        """Fold one event."""
        if isinstance(event, TextDelta):
            self._piece("text", event.text)
        elif isinstance(event, ThinkingDelta):
            index = self._piece("thinking", event.text)
            if event.signature or index not in self._signatures:
                self._signatures[index] = event.signature or self._signatures.get(index)
        elif isinstance(event, ToolCallEvent):
            call = ToolCallBlock(id=event.id, name=event.name, arguments=event.arguments)
            self._blocks.append(call)
            self._kinds.append("tool")
        elif isinstance(event, UsageEvent):
            self._usage = event.usage
        else:
            self._stop = event.stop_reason
            self.cut_at_bytes = event.cut_at_bytes
            self._done = True

    def _piece(self, kind: str, text: str) -> int:
        if self._kinds and self._kinds[-1] == kind:
            pieces = self._blocks[-1]
            assert isinstance(pieces, list)
            pieces.append(text)
        else:
            self._blocks.append([text])
            self._kinds.append(kind)
        return len(self._blocks) - 1

    @property
    def done(self) -> bool:
        """Whether `ResponseDone` was seen."""
        return self._done

    def _built(self) -> tuple[AssistantBlock, ...]:
        blocks: list[AssistantBlock] = []
        for index, (kind, block) in enumerate(zip(self._kinds, self._blocks, strict=True)):
            if isinstance(block, list):
                text = "".join(block)
                # Join once and keep the joined text, so asking twice stays linear too.
                self._blocks[index] = [text]
                if kind == "text":
                    blocks.append(TextBlock(text=text))
                else:
                    signature = self._signatures.get(index)
                    blocks.append(ThinkingBlock(thinking=text, thinking_signature=signature))
            else:
                blocks.append(block)
        return tuple(blocks)

    def message(self, *, provider: str, model: str, api: str) -> AssistantMessage:
        """The assistant message so far. A response with tool calls stops with `toolUse`."""
        blocks = self._built()
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
