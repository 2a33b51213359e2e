"""Pruning: shorten old tool results in the outgoing request, never on disk.

Tool output is usually the bulk of a long session, and old output rarely matters word for word:
the model already acted on it. Trimming it buys room long before the conversation itself has to
be summarised. The transcript keeps every result whole; only the request changes, so pruning is
free to be redone differently on the next request.

Two strengths:

- *soft* (once the request passes `trigger_ratio` of the prompt budget): every tool result
  except the newest `keep_recent_results` that is longer than `min_result_chars` keeps its head
  and tail around a marker, and old images become a text note;
- *hard* (when even that does not fit): the newest results are trimmed too, largest first,
  until the request fits or nothing is left to trim.

Results are trimmed by characters, so the outcome only depends on the messages themselves: the
same history always prunes the same way, which keeps provider prompt caches useful.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from nodmix.context.tokens import IMAGE_CHARS, chars_to_tokens
from nodmix.messages import (
    ImageBlock,
    ImageRefBlock,
    Message,
    ResultBlock,
    TextBlock,
    ToolResultMessage,
)


class PruneSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How aggressively old tool results are trimmed."""

    keep_recent_results: int = 3
    """The newest results the soft stage leaves whole."""
    trigger_ratio: float = 0.5
    """Soft pruning starts once the request passes this share of the prompt budget."""
    min_result_chars: int = 2000
    """Results at most this long are never trimmed."""
    head_chars: int = 1200
    tail_chars: int = 400


class PruneResult(msgspec.Struct, frozen=True, kw_only=True):
    """The request messages after pruning."""

    messages: Sequence[Message]
    """The input sequence itself when nothing was trimmed."""
    trimmed: int = 0
    """How many tool results were shortened."""
    saved_chars: int = 0

    @property
    def saved_tokens(self) -> int:
        """Estimated tokens the trimming saved."""
        return chars_to_tokens(self.saved_chars)


def trim_marker(omitted: int) -> str:
    """The note that replaces the middle of a trimmed result."""
    return (
        f"\n\n[... {omitted:,} characters of this old tool result were left out of the request "
        "to save context space; the full output is still in the session transcript ...]\n\n"
    )


IMAGE_NOTE = "[image from an earlier tool result left out to save context space]"


def prune_tool_results(
    messages: Sequence[Message],
    *,
    estimated_tokens: int,
    budget_tokens: int,
    settings: PruneSettings | None = None,
    hard: bool = False,
) -> PruneResult:
    """Trim tool results so the request moves toward `budget_tokens`.

    Args:
        messages: The assembled request messages.
        estimated_tokens: Estimate of the whole request (messages, system prompt, tools).
        budget_tokens: Tokens the prompt may use (context window minus the reserve); zero or
            less disables pruning.
        settings: Thresholds; defaults when `None`.
        hard: Also trim the newest results (largest first) while the request does not fit.

    Returns:
        The pruned messages, or the input unchanged when nothing needed trimming.
    """
    settings = settings or PruneSettings()
    if budget_tokens <= 0 or estimated_tokens <= budget_tokens * settings.trigger_ratio:
        return PruneResult(messages=messages)
    positions = [i for i, m in enumerate(messages) if type(m) is ToolResultMessage]
    keep = max(0, settings.keep_recent_results)
    old = positions[: len(positions) - keep] if keep else positions
    out: list[Message] | None = None
    trimmed = saved = 0
    for index in old:
        result = messages[index]
        assert isinstance(result, ToolResultMessage)
        shorter, cut = _shorten(result, settings)
        if cut:
            out = out if out is not None else list(messages)
            out[index] = shorter
            trimmed, saved = trimmed + 1, saved + cut
    remaining = estimated_tokens - chars_to_tokens(saved)
    if hard and remaining > budget_tokens:
        recent = positions[len(old) :]
        by_size = sorted(recent, key=lambda i: -_result_chars(messages[i]))
        for index in by_size:
            if remaining <= budget_tokens:
                break
            result = messages[index]
            assert isinstance(result, ToolResultMessage)
            shorter, cut = _shorten(result, settings)
            if cut:
                out = out if out is not None else list(messages)
                out[index] = shorter
                trimmed, saved = trimmed + 1, saved + cut
                remaining -= chars_to_tokens(cut)
    if out is None:
        return PruneResult(messages=messages)
    return PruneResult(messages=out, trimmed=trimmed, saved_chars=saved)


def _result_chars(message: Message) -> int:
    return sum(len(b.text) if type(b) is TextBlock else IMAGE_CHARS for b in message.content)


def _shorten(result: ToolResultMessage, settings: PruneSettings) -> tuple[ToolResultMessage, int]:
    """The result with long text shortened and images replaced; and the characters saved."""
    blocks: list[ResultBlock] = []
    saved = 0
    keep = settings.head_chars + settings.tail_chars
    for block in result.content:
        if type(block) is ImageBlock or type(block) is ImageRefBlock:
            note = block.note if isinstance(block, ImageRefBlock) else IMAGE_NOTE
            blocks.append(TextBlock(text=note))
            saved += IMAGE_CHARS - len(note)
            continue
        assert isinstance(block, TextBlock)
        text = block.text
        if len(text) <= max(settings.min_result_chars, keep):
            blocks.append(block)
            continue
        omitted = len(text) - keep
        marker = trim_marker(omitted)
        # Cut on line breaks near the limits when there are some, so code and logs stay legible.
        head = _head(text, settings.head_chars)
        tail = _tail(text, settings.tail_chars)
        shortened = head + marker + tail
        if len(shortened) >= len(text):
            blocks.append(block)
            continue
        blocks.append(TextBlock(text=shortened))
        saved += len(text) - len(shortened)
    if not saved:
        return result, 0
    return (
        ToolResultMessage(
            tool_call_id=result.tool_call_id,
            tool_name=result.tool_name,
            content=tuple(blocks),
            is_error=result.is_error,
            details=result.details,
            timestamp=result.timestamp,
        ),
        saved,
    )


def _head(text: str, size: int) -> str:
    head = text[:size]
    newline = head.rfind("\n")
    return head[:newline] if newline > size // 2 else head


def _tail(text: str, size: int) -> str:
    tail = text[-size:] if size else ""
    newline = tail.find("\n")
    return tail[newline + 1 :] if 0 <= newline < size // 2 else tail
