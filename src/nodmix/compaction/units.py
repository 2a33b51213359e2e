"""The model-visible history as items, and where it may be cut.

A cut splits the history into a summarised head and a kept tail. Providers reject a request
whose tool calls and tool results do not pair up, and a code-mode program is one piece of work
spread over an `exec` call and any number of `wait` calls, so only some items may start the tail:

- a user message (or a plugin message the model sees as user text), or an assistant message,
- and only when every tool call before it has its result before it: results never start a tail
  and a result that arrived late (another message in between) pulls that message into its
  call's unit;
- and never an assistant message that calls `wait`: it continues the program its `exec`
  started, so the whole chain (with the nested calls recorded under it) moves as one unit.

A tool call that never got a result stops blocking cuts at the next assistant message (the
replay inserts an error result for it there), and calls of an aborted or failed response never
block at all, since nothing will answer them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from nodmix.context.tokens import CHARS_PER_TOKEN, message_chars
from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
)
from nodmix.sessions.entries import CustomMessageEntry, Entry, MessageEntry, iso_to_ms

CHAIN_CONTINUATION_TOOLS: Final = frozenset({"wait"})
"""Tool calls that continue work an earlier call started (code mode's `wait`)."""


class Item(msgspec.Struct, frozen=True, gc=False):
    """One model-visible message of the history.

    Not tracked by the garbage collector (`gc=False`): items only point at messages and never
    form cycles, and a 50,000-message plan would otherwise trigger full collections.
    """

    position: int
    """Index in the entry list the items were built from."""
    entry_id: str
    message: Message
    tokens: int
    cut: bool
    """Whether the kept tail may start here."""
    turn_start: bool
    """Whether a user turn starts here."""


def build_items(entries: Sequence[Entry]) -> list[Item]:
    """The model-visible items of `entries` (nested calls and plugin state left out)."""
    # One pass over possibly tens of thousands of entries: exact type checks and local names
    # keep it at about a microsecond per entry.
    items: list[Item] = []
    append = items.append
    open_calls: set[str] = set()
    chars = message_chars
    for position, entry in enumerate(entries):
        if type(entry) is MessageEntry:
            if entry.parent_tool_call_id is not None:
                continue  # a call made inside a code-mode program: part of its parent's unit
            message: Message = entry.message
        elif type(entry) is CustomMessageEntry:
            message = _custom_message(entry)
        else:
            continue
        if type(message) is ToolResultMessage:
            if open_calls:
                open_calls.discard(message.tool_call_id)
            cut = turn = False
        elif type(message) is AssistantMessage:
            # Calls still open here never got a result: the replay repairs them right after
            # their own message, so they stop holding the cut.
            open_calls.clear()
            cut, turn = True, False
            if message.stop_reason not in _UNANSWERED:
                for block in message.content:
                    if type(block) is ToolCallBlock:
                        if block.name in CHAIN_CONTINUATION_TOOLS:
                            cut = False
                        if block.id:
                            open_calls.add(block.id)
        else:
            cut = turn = not open_calls
        tokens = -(-chars(message) // CHARS_PER_TOKEN)
        append(Item(position, entry.id, message, tokens, cut, turn))
    return items


_UNANSWERED: Final = frozenset({"aborted", "error"})
"""Stop reasons whose tool calls will never get results."""


def _custom_message(entry: CustomMessageEntry) -> UserMessage:
    content = entry.content
    blocks = (TextBlock(text=content),) if isinstance(content, str) else content
    return UserMessage(content=blocks, timestamp=iso_to_ms(entry.timestamp))


def find_cut(items: Sequence[Item], keep_tokens: int) -> int | None:
    """Index of the item that starts the kept tail, or `None` when nothing can be summarised.

    Walks back from the newest item until `keep_tokens` are covered, then takes the first user
    turn at or after that item, else the first valid cut there (splitting a long turn); when
    there is none (the newest unit alone is larger than the budget), the last valid cut before.
    Index 0 never counts: it would summarise nothing, and neither does a history that fits the
    budget whole (`None`). `len(items)` means keep nothing.
    """
    if not items:
        return None
    if keep_tokens <= 0:
        return len(items)
    covered = 0
    for index in range(len(items) - 1, -1, -1):
        covered += items[index].tokens
        if covered >= keep_tokens:
            reach = index
            break
    else:
        return None  # the whole history fits the tail budget
    # Prefer starting the tail at a user turn (no split turn to summarise separately); split a
    # turn only when the newest turn alone is larger than the budget.
    first_valid = None
    for index in range(max(reach, 1), len(items)):
        item = items[index]
        if item.cut:
            if item.turn_start:
                return index
            first_valid = first_valid or index
    if first_valid is not None:
        return first_valid
    for index in range(min(reach, len(items)) - 1, 0, -1):
        if items[index].cut:
            return index
    return None


def latest_turn_cut(items: Sequence[Item]) -> int | None:
    """A cut that keeps only the newest user turn (for forced compaction of a short history).

    `None` when there is only one turn: summarising the request being worked on would only
    replace the user's own words with a paraphrase.
    """
    for index in range(len(items) - 1, 0, -1):
        if items[index].cut and items[index].turn_start:
            return index
    return None


def turn_start_before(items: Sequence[Item], cut: int) -> int | None:
    """The start of the user turn the item at `cut` belongs to, if the cut splits a turn."""
    if cut >= len(items) or items[cut].turn_start:
        return None
    for index in range(cut - 1, -1, -1):
        if items[index].turn_start:
            return index
    return None
