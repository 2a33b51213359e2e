"""The seams of compaction: the summariser callable and plugin compaction providers.

Both are deliberately tiny. The built-in pipeline (`nodmix.compaction.summarize`) only needs
"turn this prompt into a summary", which a model call, a scripted test function or anything
else can answer. A plugin that wants to summarise differently registers a `CompactionProvider`
with `api.register_compaction_provider(...)` and is selected by `compaction.provider`; when it
fails or returns nothing, the built-in summariser takes over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import msgspec

from nodmix.messages import Message


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One call to the summarising model."""

    system: str
    """Who the summariser is and the rules it follows."""
    prompt: str
    """The serialised conversation plus the task (sent as the user message)."""
    max_tokens: int
    """Output budget."""
    purpose: str = "history"
    """`history`, `chunk`, `merge` or `turn_prefix`: for logs and scripted tests."""


Summarizer: TypeAlias = Callable[[SummaryRequest], Awaitable[str]]
"""Answers a summary request with the summary text (raise on failure)."""


class ProviderRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a plugin compaction provider receives."""

    session_key: str
    messages: Sequence[Message]
    """The messages to condense, oldest first (nested code-mode calls left out)."""
    previous_summary: str | None
    """The summary of an earlier compaction, to fold into the new one."""
    instructions: str
    """The same instructions the built-in summariser gets (identifier policy included)."""
    max_tokens: int
    trigger: str


@runtime_checkable
class CompactionProvider(Protocol):
    """A plugin's summariser. Return `None` (or an empty string) to let Nodmix summarise."""

    async def summarize(self, request: ProviderRequest) -> str | None:
        """The summary of `request.messages`."""
        ...
