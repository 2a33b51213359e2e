"""Nodmix's own message vocabulary.

These types are what the agent loop, tools, context engines and transcripts speak. Provider
adapters translate them to and from vendor JSON; nothing else sees vendor shapes.

They are frozen `msgspec.Struct`s rather than dataclasses: same value semantics, but they encode
to and decode from the JSONL transcript format directly (camelCase keys, `role`/`type` tags),
which keeps appending and loading transcripts fast.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, ClassVar, Literal, TypeAlias

import msgspec

JsonObject: TypeAlias = dict[str, Any]
"""A JSON object as decoded by `json`/`msgspec` (values are JSON-compatible)."""

StopReason: TypeAlias = Literal[
    "stop", "toolUse", "aborted", "error", "length", "content_filter", "refusal"
]
"""How a reply ended. `content_filter`: the provider withheld or cut the reply by its content
policy; `refusal`: the model declined to answer."""


def now_ms() -> int:
    """Current wall-clock time in epoch milliseconds (the message timestamp unit)."""
    return time.time_ns() // 1_000_000


class _Block(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", rename="camel"):
    pass


class TextBlock(_Block, frozen=True, tag="text"):
    """Plain text."""

    text: str


class ImageBlock(_Block, frozen=True, tag="image"):
    """An inline image (base64 data)."""

    data: str
    mime_type: str


class ImageRefBlock(_Block, frozen=True, tag="imageRef"):
    """An image kept as a file (a photo from a chat, an image the `read` tool opened): the
    transcript stores where it is, and each request that still shows it to a vision model
    reads, downscales and encodes it then (`nodmix.media`)."""

    path: str
    """Where the file is: relative to the agent's workspace (`inbox/...`), or absolute."""
    mime_type: str
    name: str | None = None
    """The name it came with (`photo.jpg`), when that differs from the saved file."""
    width: int | None = None
    height: int | None = None
    description: str | None = None
    """What `agents.defaults.media.imageModel` saw in it (for text-only models)."""

    @property
    def label(self) -> str:
        """`inbox/x.jpg` or `inbox/x.jpg (photo.jpg)`: how notes about it name the image."""
        return f"{self.path} ({self.name})" if self.name else self.path

    @property
    def note(self) -> str:
        """One line standing in for the image where it is not sent (what a request gets for
        a reference nothing resolved)."""
        seen = f": {self.description}" if self.description else ""
        return f"[image {self.label}{seen}]"


class ThinkingBlock(_Block, frozen=True, tag="thinking"):
    """Model reasoning that providers return separately from the answer."""

    thinking: str
    thinking_signature: str | None = None


class ToolCallBlock(_Block, frozen=True, tag="toolCall"):
    """A tool call requested by the model."""

    id: str
    name: str
    arguments: JsonObject


UserBlock: TypeAlias = TextBlock | ImageBlock | ImageRefBlock
AssistantBlock: TypeAlias = TextBlock | ThinkingBlock | ToolCallBlock
ResultBlock: TypeAlias = TextBlock | ImageBlock | ImageRefBlock


class Usage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Token usage as reported by the provider for one model response."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            total_tokens=self.total_tokens + other.total_tokens,
        )

    @property
    def context_tokens(self) -> int:
        """Tokens the request occupied in the context window (prompt side plus output)."""
        if self.total_tokens:
            return self.total_tokens
        return self.input + self.output + self.cache_read + self.cache_write


class _Message(msgspec.Struct, frozen=True, kw_only=True, tag_field="role", rename="camel"):
    pass


class UserMessage(_Message, frozen=True, tag="user"):
    """What the user said."""

    role: ClassVar[Literal["user"]] = "user"
    content: tuple[UserBlock, ...]
    timestamp: int = msgspec.field(default_factory=now_ms)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class AssistantMessage(_Message, frozen=True, tag="assistant"):
    """One model response: text, reasoning and tool calls."""

    role: ClassVar[Literal["assistant"]] = "assistant"
    content: tuple[AssistantBlock, ...]
    provider: str = ""
    model: str = ""
    api: str = ""
    usage: Usage = Usage()
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int = msgspec.field(default_factory=now_ms)

    @property
    def text(self) -> str:
        """The answer text (text blocks joined, reasoning excluded)."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        """The tool calls in the order the model made them."""
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))


class ToolResultMessage(_Message, frozen=True, tag="toolResult"):
    """The result of one tool call, fed back to the model."""

    role: ClassVar[Literal["toolResult"]] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: tuple[ResultBlock, ...]
    is_error: bool
    details: Any = None
    timestamp: int = msgspec.field(default_factory=now_ms)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def carries_images(messages: Iterable[Message]) -> bool:
    """Whether any message holds an image (inline or by reference): one pass over block
    types, so a request without images pays next to nothing for media."""
    for message in messages:
        if type(message) is AssistantMessage:
            continue
        for block in message.content:
            if type(block) is not TextBlock:
                return True
    return False


def user_message(text: str) -> UserMessage:
    """A user message holding one text block."""
    return UserMessage(content=(TextBlock(text=text),))
