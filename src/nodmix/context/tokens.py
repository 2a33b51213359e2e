"""Token estimation: four characters per token, as providers' tokenizers average for prose.

Provider-reported usage is the ground truth; estimates only cover what came after it (see
`nodmix.compaction.accounting`). The estimate runs on every request over the whole history, so
it is written for speed: exact type checks instead of `isinstance` chains, and tool arguments
measured by their JSON encoding (what the provider receives).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultMessage,
)
from nodmix.tools.base import ToolSpec

CHARS_PER_TOKEN = 4
IMAGE_CHARS = 4800
"""An image counts as this many characters (about 1,200 tokens), the usual provider cost."""
_MESSAGE_OVERHEAD_CHARS = 16
"""Role markers and separators every message costs on the wire."""

_encode = msgspec.json.Encoder().encode


def message_chars(message: Message) -> int:
    """Characters a message contributes to a request (tool result `details` excluded)."""
    total = _MESSAGE_OVERHEAD_CHARS
    if type(message) is AssistantMessage:
        for part in message.content:
            if type(part) is TextBlock:
                total += len(part.text)
            elif type(part) is ThinkingBlock:
                total += len(part.thinking)
            elif type(part) is ToolCallBlock:
                total += len(part.name) + len(part.id) + len(_encode(part.arguments))
        return total
    for block in message.content:
        total += len(block.text) if type(block) is TextBlock else IMAGE_CHARS
    if type(message) is ToolResultMessage:
        total += len(message.tool_name) + len(message.tool_call_id)
    return total


def chars_to_tokens(chars: int) -> int:
    """Tokens for a character count (rounded up)."""
    return -(-chars // CHARS_PER_TOKEN)


def estimate_tokens(messages: Iterable[Message]) -> int:
    """Estimated tokens of a message list (ceil of chars / 4)."""
    return chars_to_tokens(sum(map(message_chars, messages)))


def estimate_message_tokens(message: Message) -> int:
    """Estimated tokens of one message."""
    return chars_to_tokens(message_chars(message))


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of a plain string."""
    return chars_to_tokens(len(text))


def estimate_tool_tokens(tools: Sequence[ToolSpec]) -> int:
    """Estimated tokens the tool definitions of a request cost."""
    chars = sum(
        len(t.name) + len(t.description) + len(_encode(t.parameters)) + _MESSAGE_OVERHEAD_CHARS
        for t in tools
    )
    return chars_to_tokens(chars)
