"""The memory seam: what answers `memory_search` and `memory_get`.

`plugins.slots.memory` selects one memory backend per run, like `plugins.slots.contextEngine`
selects a context engine: `builtin` (the default, Nodmix's own index over `MEMORY.md`,
`memory/**/*.md` and optionally past sessions) or one a plugin registers with
`api.register_memory(memory_id, factory)`. A factory is called once per agent with a
`MemoryContext` (the plugin's config, the agent's directory and workspace) and returns a
`MemoryBackend`. The tools stay the same whichever backend answers, and so do their rules:
turns that do not speak for the owner never see past sessions or another chat's notes.

The parameter and result types are frozen `msgspec.Struct`s; construct them with keywords.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

import msgspec

from nodmix.memory.results import SearchHit

BUILTIN_MEMORY_ID: Final = "builtin"
"""The backend `plugins.slots.memory` selects when unset: Nodmix's own memory index."""


class MemoryInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Identity of a memory backend."""

    id: str
    name: str
    version: str = "0"


class MemoryContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a memory factory receives (once per agent)."""

    agent_id: str
    config: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """The owning plugin's `plugins.entries.<id>.config`."""
    agent_dir: Path | None = None
    """`$NODMIX_STATE_DIR/agents/<agent id>`: where the backend may keep its own state."""
    workspace_dir: Path | None = None
    """The agent's workspace (where `MEMORY.md` and `memory/` live)."""


class MemorySearch(msgspec.Struct, frozen=True, kw_only=True):
    """A `memory_search` call."""

    query: str
    max_results: int
    min_score: float | None = None
    session_key: str = ""


class MemorySearchResult(msgspec.Struct, frozen=True, kw_only=True):
    """Ranked hits, best first. `mode` names how they were found (`hybrid`, `keyword`...);
    `warning` is shown to the model (a degraded search, say)."""

    hits: Sequence[SearchHit]
    mode: str = "keyword"
    warning: str | None = None


class MemoryRead(msgspec.Struct, frozen=True, kw_only=True):
    """A `memory_get` call: lines `start`.. of a path a search returned."""

    path: str
    start: int = 1
    lines: int | None = None


class MemoryText(msgspec.Struct, frozen=True, kw_only=True):
    """What `memory_get` returns: the text of lines `first`..`last` (inclusive)."""

    text: str
    first: int
    last: int


@runtime_checkable
class MemoryBackend(Protocol):
    """Answers memory searches and reads for one agent."""

    @property
    def info(self) -> MemoryInfo: ...

    async def search(self, params: MemorySearch) -> MemorySearchResult:
        """Ranked hits for a query."""
        ...

    async def read(self, params: MemoryRead) -> MemoryText:
        """Lines of one memory document.

        Raises:
            FileNotFoundError: no such document.
        """
        ...


MemoryFactory: TypeAlias = Callable[[MemoryContext], MemoryBackend]
