"""Planning a compaction: what gets summarised, what stays verbatim, and in which chunks.

Planning is pure and cheap (one pass over the entries since the latest compaction), so it runs
before anything expensive: a plan that finds nothing to summarise never reaches a model.

```
entries since the latest compaction ─► items ─► cut ─► [ history | turn prefix | kept tail ]
                                                           chunks    (split turn)   verbatim
```
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from nodmix.compaction.accounting import reported_context_tokens
from nodmix.compaction.chunking import Chunk, chunk_items, max_chunk_tokens
from nodmix.compaction.units import (
    Item,
    build_items,
    find_cut,
    latest_turn_cut,
    turn_start_before,
)
from nodmix.context.tokens import estimate_text_tokens
from nodmix.sessions.entries import CompactionEntry, Entry
from nodmix.sessions.replay import context_entries


class CompactionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """A planned compaction. Items index into `items`; positions into `entries`."""

    entries: Sequence[Entry]
    """Entries since the latest compaction (what the model currently sees, plus state)."""
    items: Sequence[Item]
    cut: int
    """`items[cut:]` stay verbatim; `len(items)` keeps nothing (a hard checkpoint)."""
    history_end: int
    """`items[:history_end]` are summarised; `items[history_end:cut]` open a split turn."""
    chunks: Sequence[Chunk]
    """Chunks of `items[:history_end]`."""
    chunk_tokens: int
    """Token limit of one summariser input (a larger single unit is split by text)."""
    previous: CompactionEntry | None
    tokens_before: int

    @property
    def history(self) -> Sequence[Item]:
        """The items summarised as history."""
        return self.items[: self.history_end]

    @property
    def turn_prefix(self) -> Sequence[Item]:
        """The items of a split turn that come before the cut."""
        return self.items[self.history_end : self.cut]

    def position(self, cut: int) -> int:
        """Entry position where a tail starting at item `cut` begins."""
        return self.items[cut].position if cut < len(self.items) else len(self.entries)

    def first_kept_entry_id(self, cut: int) -> str | None:
        """The entry id that starts a tail at item `cut` (`None`: nothing is kept)."""
        return self.items[cut].entry_id if cut < len(self.items) else None


def plan_compaction(
    entries: Sequence[Entry],
    *,
    keep_tokens: int,
    summary_window: int,
    force: bool = False,
    hard_checkpoint: bool = False,
) -> CompactionPlan | str:
    """Plan a compaction of a transcript's entries, or say why there is nothing to do.

    Args:
        entries: The whole transcript (only what follows the latest compaction matters).
        keep_tokens: Budget of the verbatim tail.
        summary_window: Context window of the summarising model (sizes the chunks).
        force: Compact even when everything fits the tail budget (keep only the newest turn).
        hard_checkpoint: Keep nothing; summarise everything.

    Returns:
        The plan, or a reason such as "nothing to compact".
    """
    previous, kept = context_entries(entries)
    items = build_items(kept)
    if not items:
        return "nothing to compact"
    if hard_checkpoint:
        cut: int | None = len(items)
    else:
        cut = find_cut(items, keep_tokens)
        if cut is None and force:
            cut = latest_turn_cut(items)
    if cut is None:
        if latest_turn_cut(items) is None:
            return "nothing to compact: the conversation is a single exchange"
        return "nothing to compact: the conversation fits the kept-tail budget"
    turn_start = turn_start_before(items, cut)
    history_end = cut if turn_start is None else turn_start
    history = items[:history_end]
    limit = max_chunk_tokens(history, summary_window)
    chunks = chunk_items(history, limit)
    tokens = reported_context_tokens(entries)
    if tokens is None:
        summary = estimate_text_tokens(previous.summary) if previous is not None else 0
        tokens = summary + sum(i.tokens for i in items)
    return CompactionPlan(
        entries=kept,
        items=items,
        cut=cut,
        history_end=history_end,
        chunks=chunks,
        chunk_tokens=limit,
        previous=previous,
        tokens_before=tokens,
    )
