"""The context-engine seam: how the messages of each model request are assembled.

Nodmix calls the active engine at four points of a turn: `ingest` when a message is added,
`assemble` before every model request, `compact` when the window is full or the user asks, and
`after_turn` when a turn ends. Optional members are looked up with `getattr` and skipped when
absent; see `context-engine.md` in the spec for the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from nodmix.messages import Message

PromptAuthority: TypeAlias = Literal["assembled", "preassembly_may_overflow"]
CompactionTrigger: TypeAlias = Literal["auto", "manual", "overflow", "budget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextEngineInfo:
    """Identity of an engine and whether it owns compaction."""

    id: str
    name: str
    version: str = "0"
    owns_compaction: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestParams:
    """One message added to a session."""

    session_id: str
    session_key: str
    message: Message
    is_heartbeat: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AssembleParams:
    """Input of `assemble`: the replayed session history and the budget it must fit."""

    session_id: str
    session_key: str
    messages: Sequence[Message]
    token_budget: int
    available_tools: frozenset[str] = frozenset()
    model: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AssembleResult:
    """What the model will see, and the engine's estimate of its size."""

    messages: Sequence[Message]
    estimated_tokens: int
    system_prompt_addition: str | None = None
    prompt_authority: PromptAuthority = "assembled"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactParams:
    """Input of `compact`."""

    session_id: str
    session_key: str
    trigger: CompactionTrigger
    force: bool = False
    instructions: str | None = None
    token_budget: int | None = None
    current_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactResult:
    """Outcome of `compact`. A rotated transcript is named by `session_id`/`session_file`."""

    ok: bool
    compacted: bool
    reason: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str | None = None
    session_id: str | None = None
    session_file: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterTurnParams:
    """A finished turn."""

    session_id: str
    session_key: str
    messages: Sequence[Message]


@runtime_checkable
class ContextEngine(Protocol):
    """A context engine. Optional members: `bootstrap`, `ingest_batch`, `after_turn`,
    `prepare_subagent_spawn`, `on_subagent_ended`, `dispose`."""

    @property
    def info(self) -> ContextEngineInfo: ...

    async def ingest(self, params: IngestParams) -> None: ...

    async def assemble(self, params: AssembleParams) -> AssembleResult: ...

    async def compact(self, params: CompactParams) -> CompactResult: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineContext:
    """What an engine factory receives."""

    config: Mapping[str, Any] = field(default_factory=dict)
    """The owning plugin's `plugins.entries.<id>.config`."""
    agent_dir: Path | None = None
    workspace_dir: Path | None = None
    services: Mapping[str, Any] = field(default_factory=dict)
    """Runtime services an engine may use (e.g. `compact_with_runtime`)."""


ContextEngineFactory: TypeAlias = Callable[[EngineContext], ContextEngine]
