"""Split the history to summarise into chunks a summarising model can take in one call.

Chunks only break where the kept tail could start (`Item.cut`), so a tool call and its results,
or a code-mode `exec`/`wait` chain, always land in the same chunk. Chunks are balanced: a long
history becomes `n` chunks of about equal size rather than `n - 1` full ones and a small rest.
A single unit larger than the limit becomes a chunk of its own; the summariser splits its text
further (see `nodmix.compaction.serialize.split_text`).

The chunk limit adapts to the messages: when the average message is large compared with the
window, chunks get smaller so that the estimate's error (four characters per token is only an
average) cannot push a summary request past the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from nodmix.compaction.units import Item

BASE_CHUNK_RATIO: Final = 0.4
MIN_CHUNK_RATIO: Final = 0.15
SAFETY_MARGIN: Final = 1.2
"""Estimates are multiplied by this before they are compared with a limit."""
SUMMARIZATION_OVERHEAD_TOKENS: Final = 4096
"""Room for the summariser's instructions and a previous summary next to a chunk."""
MIN_CHUNK_TOKENS: Final = 256


class Chunk(msgspec.Struct, frozen=True, gc=False):
    """Items `start` to `end` (exclusive) of the history."""

    start: int
    end: int
    tokens: int


def adaptive_chunk_ratio(items: Sequence[Item], context_window: int) -> float:
    """The share of the window one chunk may fill, smaller when messages are large."""
    if not items or context_window <= 0:
        return BASE_CHUNK_RATIO
    average = sum(i.tokens for i in items) / len(items)
    ratio = average * SAFETY_MARGIN / context_window
    if ratio > 0.1:
        return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - min(2 * ratio, 0.25))
    return BASE_CHUNK_RATIO


def max_chunk_tokens(items: Sequence[Item], context_window: int) -> int:
    """Token limit of one chunk for a summarising model with `context_window` tokens."""
    overhead = min(SUMMARIZATION_OVERHEAD_TOKENS, context_window // 4)
    share = int(context_window * adaptive_chunk_ratio(items, context_window))
    return max(MIN_CHUNK_TOKENS, share - overhead)


def is_oversized(tokens: int, context_window: int) -> bool:
    """Whether one message is too large to summarise in a single call (half the window)."""
    return tokens * SAFETY_MARGIN > context_window * 0.5


def chunk_items(items: Sequence[Item], max_tokens: int) -> list[Chunk]:
    """Balanced chunks of at most `max_tokens` (with the safety margin), split at cut points."""
    if not items:
        return []
    limit = max(1, int(max_tokens / SAFETY_MARGIN))
    units = _units(items)
    total = sum(tokens for _, _, tokens in units)
    parts = max(1, -(-total // limit))
    target = total / parts
    chunks: list[Chunk] = []
    start, size = units[0][0], 0
    for unit_start, unit_end, tokens in units:
        if size and (size + tokens > limit or size >= target):
            chunks.append(Chunk(start, unit_start, size))
            start, size = unit_start, 0
        size += tokens
        end = unit_end
    chunks.append(Chunk(start, end, size))
    return chunks


def _units(items: Sequence[Item]) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of each run of items that must stay together."""
    units: list[tuple[int, int, int]] = []
    start, tokens = 0, 0
    for index, item in enumerate(items):
        if item.cut and index > start:
            units.append((start, index, tokens))
            start, tokens = index, 0
        tokens += item.tokens
    units.append((start, len(items), tokens))
    return units


def split_by_token_share(items: Sequence[Item], parts: int) -> list[Chunk]:
    """At most `parts` chunks of about equal token share, split at cut points.

    A chunk closes once adding the next unit would pass `total / parts`; the last chunk takes
    whatever remains, so there are never more than `parts` chunks.
    """
    if not items:
        return []
    units = _units(items)
    target = sum(tokens for _, _, tokens in units) / max(1, parts)
    chunks: list[Chunk] = []
    start, size = units[0][0], 0
    for unit_start, _, tokens in units:
        if size and size + tokens > target and len(chunks) < parts - 1:
            chunks.append(Chunk(start, unit_start, size))
            start, size = unit_start, 0
        size += tokens
    chunks.append(Chunk(start, len(items), size))
    return chunks
