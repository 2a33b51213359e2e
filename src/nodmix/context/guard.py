"""The seam between the agent loop and context management for one turn.

The loop knows nothing about budgets, summaries or memory flushes. Before every model request
it hands the guard a `RequestDraft` and sends whatever messages the guard's `RequestPlan` holds;
when the plan (or the provider, with a context-overflow error) says the context is too large, it
asks the guard to compact and then assembles again. The runtime builds the guard for each turn
(`nodmix.compaction.guard.TurnGuard`); tests can drive the loop without one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from nodmix.context.base import AssembleResult, CompactionTrigger
from nodmix.messages import Message
from nodmix.tools.base import ToolSpec


class RequestDraft(msgspec.Struct, frozen=True, kw_only=True):
    """A model request about to be sent."""

    assembled: AssembleResult
    """What the context engine returned."""
    unwindowed: Sequence[Message]
    """The session history handed to `assemble` (for `preassembly_may_overflow` engines)."""
    system: str
    tools: Sequence[ToolSpec]


class RequestPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with a draft."""

    messages: Sequence[Message]
    """The messages to send (old tool results possibly trimmed)."""
    tokens: int
    """Best estimate of the request's size in tokens."""
    compact: bool = False
    """Compact before sending: the request would not leave the reserved headroom."""


class ContextGuard(Protocol):
    """Keeps one turn's requests inside the model's context window."""

    @property
    def token_budget(self) -> int:
        """Tokens the prompt may use (context window minus the reserve); for `assemble`."""
        ...

    @property
    def context_window(self) -> int:
        """The model's whole context window in tokens (a message larger than it is refused)."""
        ...

    async def before_turn(self) -> None:
        """Housekeeping before the user's message is recorded (the transcript byte guard)."""
        ...

    async def review(self, draft: RequestDraft, *, may_compact: bool) -> RequestPlan:
        """Size up a request; trim tool results; maybe run the silent memory flush.

        With `may_compact=False` the guard must not ask for compaction and instead trims as
        hard as it can.
        """
        ...

    async def compact(
        self, trigger: CompactionTrigger, *, attempt: int, error: str | None = None
    ) -> bool:
        """Compact the session through the context engine; True when history was compacted."""
        ...
