"""Token estimation: four characters per token, as providers' tokenizers average for prose.

Provider-reported usage is the ground truth; estimates only cover what came after it.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultMessage,
    UserMessage,
)

CHARS_PER_TOKEN = 4
IMAGE_CHARS = 4800
_MESSAGE_OVERHEAD_CHARS = 16


def message_chars(message: Message) -> int:
    """Characters a message contributes to a request (tool result `details` excluded)."""
    total = _MESSAGE_OVERHEAD_CHARS
    if isinstance(message, UserMessage | ToolResultMessage):
        for block in message.content:
            total += len(block.text) if isinstance(block, TextBlock) else IMAGE_CHARS
        if isinstance(message, ToolResultMessage):
            total += len(message.tool_name) + len(message.tool_call_id)
        return total
    assert isinstance(message, AssistantMessage)
    for part in message.content:
        if isinstance(part, TextBlock):
            total += len(part.text)
        elif isinstance(part, ThinkingBlock):
            total += len(part.thinking)
        else:
            total += len(part.name) + len(part.id) + _json_len(part.arguments)
    return total


def _json_len(value: object) -> int:
    import msgspec

    return len(msgspec.json.encode(value))


def estimate_tokens(messages: Iterable[Message]) -> int:
    """Estimated tokens of a message list (ceil of chars / 4)."""
    chars = sum(message_chars(m) for m in messages)
    return -(-chars // CHARS_PER_TOKEN)


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of a plain string."""
    return -(-len(text) // CHARS_PER_TOKEN)
