"""Scripted models for tests and demos: deterministic, in process, no network.

A *respond function* decides what the model says: it receives the `ModelRequest` and returns
a `ModelReply` (text, reasoning, tool calls, usage) or a `ModelError` (an HTTP-style failure),
synchronously or as an awaitable. The same function scripts `FunctionProvider` here and the
real-socket `nodmix.testing.model_server.ScriptedModelServer`, so a test can move between the
two without changing its script::

    def respond(request: ModelRequest) -> ModelReply:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return ModelReply.tool_call("read", {"path": "notes.txt"})
        return ModelReply.text("done")

    provider = FunctionProvider(respond)

Replies are streamed as events the way a real adapter streams them: reasoning and text in a
few chunks, then whole tool calls, usage, and `ResponseDone`. Errors are raised as the same
`ProviderError` subclasses an adapter raises for that status.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import anyio
import anyio.lowlevel

from nodmix.errors import ProviderError
from nodmix.messages import (
    AssistantBlock,
    AssistantMessage,
    ImageBlock,
    ImageRefBlock,
    JsonObject,
    Message,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)
from nodmix.providers.base import (
    ModelEvent,
    ModelRequest,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
)
from nodmix.providers.errors import classify_error
from nodmix.providers.guard import check_tool_surface

_IMAGE_CHARS = 4800
"""An image counts as this many characters when estimating tokens (chars / 4)."""


@dataclass(frozen=True, slots=True)
class ReplyToolCall:
    """A tool call in a scripted reply."""

    name: str
    arguments: JsonObject = field(default_factory=dict)
    id: str | None = None
    """Call id; generated (`call_1`, `call_2`, ... per provider or server) when `None`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReply:
    """What a scripted model answers."""

    content: str = ""
    """The answer text."""
    thinking: str = ""
    """Reasoning, streamed before the answer."""
    thinking_signature: str | None = None
    """Signature of the reasoning (Anthropic round-trips it)."""
    tool_calls: tuple[ReplyToolCall, ...] = ()
    usage: Usage | None = None
    """Reported usage; estimated from characters (chars / 4) when `None`."""
    stop_reason: StopReason | None = None
    """`toolUse` when there are tool calls and `stop` otherwise, unless set."""

    @classmethod
    def text(cls, text: str, *, thinking: str = "", usage: Usage | None = None) -> ModelReply:
        """A plain answer."""
        return cls(content=text, thinking=thinking, usage=usage)

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: JsonObject | None = None,
        *,
        id: str | None = None,
        text: str = "",
        usage: Usage | None = None,
    ) -> ModelReply:
        """A reply that calls one tool (optionally after some text)."""
        call = ReplyToolCall(name, dict(arguments or {}), id)
        return cls(content=text, tool_calls=(call,), usage=usage)


@dataclass(frozen=True, slots=True)
class ModelError:
    """A scripted failure: the HTTP status and message the provider would send.

    In process it raises the `ProviderError` an adapter raises for that status (429 ->
    `RateLimitedError`, 401 -> `ProviderAuthError`, overflow text -> `ContextOverflowError`,
    ...); over HTTP the scripted server answers with that status and a vendor error body.
    """

    status: int
    message: str
    retry_after: float | None = field(default=None, kw_only=True)
    """Seconds, sent as `Retry-After`."""
    partial: str = field(default="", kw_only=True)
    """Text streamed before the failure; the error then arrives inside a `200` stream."""

    def to_error(self, provider: str) -> ProviderError:
        """The exception an adapter for `provider` raises for this failure."""
        return classify_error(
            provider=provider,
            status=self.status,
            message=self.message,
            retry_after=self.retry_after,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelStall:
    """A scripted model that never finishes its reply (for timeout tests).

    Over HTTP the scripted server answers `200` with an event stream, streams `partial`, and
    then either sends nothing more (`mode="hang"`) or only keep-alive comments and blank lines
    every `interval` seconds (`mode="trickle"`), until the client hangs up. In process the
    provider streams `partial` and waits forever.
    """

    mode: Literal["hang", "trickle"] = "hang"
    partial: str = ""
    """Text streamed before the stall."""
    interval: float = 0.05
    """Seconds between keep-alive bytes (`trickle`)."""


Reply: TypeAlias = ModelReply | ModelError | ModelStall
Respond: TypeAlias = Callable[[ModelRequest], Reply | Awaitable[Reply]]
"""A respond function: sync or async, returning a reply or a scripted error."""


async def run_respond(respond: Respond, request: ModelRequest) -> Reply:
    """Call a respond function (sync or async) and check what it returned."""
    result = respond(request)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, ModelReply | ModelError | ModelStall):
        raise TypeError(
            f"respond() must return ModelReply, ModelError or ModelStall, got {result!r}"
        )
    return result


MAX_CHUNK_CHARS = 16_384
"""Longest piece a scripted model streams at once; long replies come in more pieces."""


def split_text(text: str, parts: int = 3) -> list[str]:
    """Split text into `parts` consecutive chunks, or more of at most `MAX_CHUNK_CHARS` each
    for long text (how scripted models stream it)."""
    if not text:
        return []
    parts = max(parts, math.ceil(len(text) / MAX_CHUNK_CHARS))
    size = math.ceil(len(text) / max(1, min(parts, len(text))))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _message_chars(message: Message) -> int:
    total = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, ImageBlock | ImageRefBlock):
            total += _IMAGE_CHARS
        elif isinstance(block, ThinkingBlock):
            total += len(block.thinking)
        else:
            total += len(block.name) + len(json.dumps(block.arguments))
    return total


def estimate_usage(request: ModelRequest, blocks: Iterable[AssistantBlock]) -> Usage:
    """Deterministic usage: prompt and reply characters divided by four, rounded up."""
    prompt = len(request.system) + sum(_message_chars(m) for m in request.messages)
    prompt += sum(
        len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in request.tools
    )
    reply = _message_chars(AssistantMessage(content=tuple(blocks)))
    input_tokens, output_tokens = math.ceil(prompt / 4), math.ceil(reply / 4)
    return Usage(
        input=input_tokens, output=output_tokens, total_tokens=input_tokens + output_tokens
    )


def reply_message(
    reply: ModelReply,
    request: ModelRequest,
    *,
    next_id: Callable[[], str],
    provider: str = "scripted",
    api: str = "scripted",
) -> AssistantMessage:
    """The assistant message a reply stands for, with call ids and usage filled in."""
    blocks: list[AssistantBlock] = []
    if reply.thinking:
        blocks.append(
            ThinkingBlock(thinking=reply.thinking, thinking_signature=reply.thinking_signature)
        )
    if reply.content:
        blocks.append(TextBlock(text=reply.content))
    blocks.extend(
        ToolCallBlock(id=call.id or next_id(), name=call.name, arguments=call.arguments)
        for call in reply.tool_calls
    )
    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    return AssistantMessage(
        content=tuple(blocks),
        provider=provider,
        model=request.model.id,
        api=api,
        usage=reply.usage or estimate_usage(request, blocks),
        stop_reason=stop,
    )


def message_events(message: AssistantMessage) -> list[ModelEvent]:
    """The event stream of an assistant message: chunked reasoning and text, whole tool calls."""
    events: list[ModelEvent] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            chunks = split_text(block.thinking)
            events.extend(ThinkingDelta(text=chunk) for chunk in chunks[:-1])
            events.append(ThinkingDelta(text=chunks[-1], signature=block.thinking_signature))
        elif isinstance(block, TextBlock):
            events.extend(TextDelta(text=chunk) for chunk in split_text(block.text))
        else:
            events.append(ToolCallEvent(id=block.id, name=block.name, arguments=block.arguments))
    events.append(UsageEvent(usage=message.usage))
    events.append(ResponseDone(stop_reason=message.stop_reason))
    return events


class FunctionProvider:
    """A `Provider` whose answers come from a respond function. Records every request.

    Args:
        respond: Decides each reply (sync or async); see the module docstring.
        name: Provider id reported on messages and errors.
        api: API name reported on messages.
    """

    def __init__(self, respond: Respond, *, name: str = "scripted", api: str = "scripted") -> None:
        self._respond = respond
        self._name = name
        self._api = api
        self._ids = itertools.count(1)
        self.requests: list[ModelRequest] = []
        """Every request that reached the model, in order."""
        self.closed = False

    @property
    def name(self) -> str:
        """The provider id."""
        return self._name

    @property
    def api(self) -> str:
        """The API name."""
        return self._api

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Ask the respond function and stream its reply.

        Raises:
            ProviderError: For a `ModelError` reply, and for a code-mode tool surface
                violation (checked first, like the real adapters; nothing is recorded then).
        """
        names = [tool.name for tool in request.tools]
        check_tool_surface(names, request.expected_tool_names, provider=self._name)
        self.requests.append(request)
        reply = await run_respond(self._respond, request)
        if isinstance(reply, ModelError):
            for chunk in split_text(reply.partial):
                yield TextDelta(text=chunk)
            raise reply.to_error(self._name)
        if isinstance(reply, ModelStall):
            for chunk in split_text(reply.partial):
                yield TextDelta(text=chunk)
            await anyio.sleep_forever()
            return
        message = reply_message(
            reply,
            request,
            next_id=lambda: f"call_{next(self._ids)}",
            provider=self._name,
            api=self._api,
        )
        for event in message_events(message):
            # A checkpoint per event: consumers see a real stream (other tasks run, and
            # cancellation can land between chunks).
            await anyio.lowlevel.checkpoint()
            yield event

    async def aclose(self) -> None:
        """Nothing to release; marks the provider closed."""
        self.closed = True


ScriptItem: TypeAlias = ModelReply | ModelError | ModelStall | Respond


class ScriptedProvider:
    """A `Provider` that answers with a fixed list of replies, one per request.

    Items are `ModelReply`, `ModelError`, or a respond function for a step that must look at
    the request. Running out of replies fails the request with `AssertionError`.
    """

    def __init__(
        self, replies: Iterable[ScriptItem], *, name: str = "scripted", api: str = "scripted"
    ) -> None:
        self._queue: deque[ScriptItem] = deque(replies)
        self._total = len(self._queue)
        self._inner = FunctionProvider(self._next, name=name, api=api)

    def _next(self, request: ModelRequest) -> Reply | Awaitable[Reply]:
        if not self._queue:
            raise AssertionError(
                f"ScriptedProvider: request #{len(self.requests)} but only "
                f"{self._total} replies were scripted"
            )
        item = self._queue.popleft()
        if isinstance(item, ModelReply | ModelError | ModelStall):
            return item
        return item(request)

    @property
    def name(self) -> str:
        """The provider id."""
        return self._inner.name

    @property
    def api(self) -> str:
        """The API name."""
        return self._inner.api

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request that reached the model, in order."""
        return self._inner.requests

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self._queue)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the next scripted reply."""
        return self._inner.stream(request)

    def assert_complete(self) -> None:
        """Fail unless every scripted reply was used."""
        if self._queue:
            raise AssertionError(
                f"ScriptedProvider: {len(self._queue)} of {self._total} replies were not used"
            )

    async def aclose(self) -> None:
        """Nothing to release."""
        await self._inner.aclose()
