"""Rebuild the message list a provider sees from a transcript's entries.

`messages_for_model` is a pure function: entries in, messages out. It

1. starts at the latest compaction, if any: its summary becomes one user message, followed by
   the entries from the compaction's `firstKeptEntryId` onwards;
2. keeps only what belongs in the model context: top-level messages and `custom_message`
   entries (as user text). Calls made inside code-mode programs (`parentToolCallId`) are left
   out because the model only saw the outer `exec`/`wait` result;
3. repairs tool-call pairing, because every provider rejects a request where an assistant tool
   call has no result or a result has no call. Transcripts get into that state when a turn is
   interrupted (crash, cancel, a tool that never returned).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
)
from nodmix.sessions.entries import (
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    iso_to_ms,
)

COMPACTION_SUMMARY_INTRO: Final = (
    "Earlier parts of this conversation were condensed to save space. "
    "The summary below stands in for them; treat it as what was said and done before."
)
"""Framing sentence put before a compaction summary in the model context."""

MISSING_RESULT_TEXT: Final = (
    "[nodmix] no result was recorded for this tool call (the turn was interrupted); "
    "treat it as failed."
)
"""Text of the synthetic error result inserted for a tool call that has none."""


def compaction_summary_message(entry: CompactionEntry) -> UserMessage:
    """The user message that stands in for the history a compaction summarised."""
    text = f"{COMPACTION_SUMMARY_INTRO}\n\n<summary>\n{entry.summary}\n</summary>"
    return UserMessage(content=(TextBlock(text=text),), timestamp=iso_to_ms(entry.timestamp))


def context_entries(entries: Sequence[Entry]) -> tuple[CompactionEntry | None, list[Entry]]:
    """The latest compaction and the entries replayed verbatim after its summary.

    Without a compaction this is `(None, entries)`. With one, the kept entries run from its
    `firstKeptEntryId` to the end, minus compaction entries (the latest summary already folds
    in the earlier ones). If the first kept id is not found (a hard checkpoint keeps nothing),
    only entries appended after the compaction are kept.
    """
    latest = None
    for index in range(len(entries) - 1, -1, -1):
        if isinstance(entries[index], CompactionEntry):
            latest = index
            break
    if latest is None:
        return None, list(entries)
    compaction = entries[latest]
    assert isinstance(compaction, CompactionEntry)
    start = latest + 1
    for index in range(latest):
        if entries[index].id == compaction.first_kept_entry_id:
            start = index
            break
    kept: list[Entry] = [e for e in entries[start:] if not isinstance(e, CompactionEntry)]
    return compaction, kept


def messages_for_model(entries: Sequence[Entry]) -> list[Message]:
    """The messages to send to the model for a transcript's entries (in file order)."""
    compaction, kept = context_entries(entries)
    messages: list[Message] = []
    if compaction is not None:
        messages.append(compaction_summary_message(compaction))
    for entry in kept:
        if isinstance(entry, MessageEntry):
            if entry.parent_tool_call_id is None:
                messages.append(entry.message)
        elif isinstance(entry, CustomMessageEntry):
            messages.append(_custom_message(entry))
        # Everything else (custom state, model changes, titles, unknown types) is not context.
    return repair_tool_pairing(messages)


def _custom_message(entry: CustomMessageEntry) -> UserMessage:
    content = entry.content
    blocks = (TextBlock(text=content),) if isinstance(content, str) else content
    return UserMessage(content=blocks, timestamp=iso_to_ms(entry.timestamp))


def repair_tool_pairing(messages: Iterable[Message]) -> list[Message]:
    """Make tool calls and results pair up the way every provider requires.

    After each assistant message come exactly one result per tool call, in call order: the
    recorded result if there is one (even if other messages were recorded in between, which
    then follow the results), else a synthetic error result. Results whose call is not in the
    preceding assistant message, and repeated results for one call, are dropped. Assistant
    messages without content (a failed or empty response) are dropped, since providers reject
    empty assistant turns.
    """
    out: list[Message] = []
    group: _CallGroup | None = None
    for message in messages:
        if isinstance(message, AssistantMessage):
            if group is not None:
                group.flush(out)
                group = None
            if not message.content:
                continue
            if message.tool_calls:
                group = _CallGroup(message)
            else:
                out.append(message)
        elif isinstance(message, ToolResultMessage):
            if group is not None:
                group.add_result(message)
            # else: an orphan result (its call was dropped or never recorded)
        elif group is not None:
            group.displaced.append(message)
        else:
            out.append(message)
    if group is not None:
        group.flush(out)
    return out


class _CallGroup:
    """An assistant message with tool calls, collecting its results until the next assistant."""

    __slots__ = ("assistant", "displaced", "results")

    def __init__(self, assistant: AssistantMessage) -> None:
        self.assistant = assistant
        self.results: dict[str, ToolResultMessage | None] = {
            call.id: None for call in assistant.tool_calls
        }
        self.displaced: list[Message] = []

    def add_result(self, result: ToolResultMessage) -> None:
        # Only the first result for a call of this assistant message counts; anything else is
        # an orphan or a duplicate that a provider would reject.
        if result.tool_call_id in self.results and self.results[result.tool_call_id] is None:
            self.results[result.tool_call_id] = result

    def flush(self, out: list[Message]) -> None:
        out.append(self.assistant)
        emitted: set[str] = set()
        for call in self.assistant.tool_calls:
            if call.id in emitted:  # a call id repeated within one message gets one result
                continue
            emitted.add(call.id)
            result = self.results.get(call.id)
            out.append(result if result is not None else _missing_result(self.assistant, call))
        out.extend(self.displaced)


def _missing_result(assistant: AssistantMessage, call: ToolCallBlock) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=(TextBlock(text=MISSING_RESULT_TEXT),),
        is_error=True,
        details={"synthetic": "missing_result"},
        timestamp=assistant.timestamp,
    )
