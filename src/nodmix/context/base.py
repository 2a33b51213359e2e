"""The context-engine seam: how the messages of each model request are assembled.

Nodmix calls the active engine at four points of a turn: `ingest` when a message is added,
`assemble` before every model request, `compact` when the window is full or the user asks, and
`after_turn` when a turn ends. Optional members are looked up with `getattr` and skipped when
absent; see `context-engine.md` in the spec for the contract. An engine that has `ingest_batch`
receives a finished turn's messages in one call instead of one `ingest` per message; the runtime
calls `bootstrap` the first time an engine meets a session id and `dispose` at shutdown.

The parameter and result types are frozen `msgspec.Struct`s (built in C, cheap at start-up);
construct them with keyword arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import msgspec

from nodmix.messages import Message

PromptAuthority: TypeAlias = Literal["assembled", "preassembly_may_overflow"]
CompactionTrigger: TypeAlias = Literal["auto", "manual", "overflow", "budget"]


class ContextEngineInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Identity of an engine and whether it owns compaction."""

    id: str
    name: str
    version: str = "0"
    owns_compaction: bool = False


class IngestParams(msgspec.Struct, frozen=True, kw_only=True):
    """One message added to a session."""

    session_id: str
    session_key: str
    message: Message
    is_heartbeat: bool = False


class AssembleParams(msgspec.Struct, frozen=True, kw_only=True):
    """Input of `assemble`: the replayed session history and the budget it must fit."""

    session_id: str
    session_key: str
    messages: Sequence[Message]
    token_budget: int
    available_tools: frozenset[str] = frozenset()
    model: str = ""


class AssembleResult(msgspec.Struct, frozen=True, kw_only=True):
    """What the model will see, and the engine's estimate of its size."""

    messages: Sequence[Message]
    estimated_tokens: int
    system_prompt_addition: str | None = None
    prompt_authority: PromptAuthority = "assembled"


class CompactParams(msgspec.Struct, frozen=True, kw_only=True):
    """Input of `compact`."""

    session_id: str
    session_key: str
    trigger: CompactionTrigger
    force: bool = False
    instructions: str | None = None
    token_budget: int | None = None
    current_tokens: int | None = None
    runtime_context: object | None = None
    """Opaque state from the runtime (event sink, model chain, the live session, the attempt
    number). Engines that delegate pass `params` on unchanged; they never need to read it."""


class CompactResult(msgspec.Struct, frozen=True, kw_only=True):
    """Outcome of `compact`. A rotated transcript is named by `session_id`/`session_file`."""

    ok: bool
    compacted: bool
    reason: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str | None = None
    session_id: str | None = None
    session_file: str | None = None


class AfterTurnParams(msgspec.Struct, frozen=True, kw_only=True):
    """A finished turn."""

    session_id: str
    session_key: str
    messages: Sequence[Message]


class BootstrapParams(msgspec.Struct, frozen=True, kw_only=True):
    """Input of the optional `bootstrap`: the first time an engine sees a session."""

    session_id: str
    session_key: str
    messages: Sequence[Message]
    """The session's history as the model would see it now (compaction applied)."""


class IngestBatchParams(msgspec.Struct, frozen=True, kw_only=True):
    """Input of the optional `ingest_batch`: every message a finished turn added."""

    session_id: str
    session_key: str
    messages: Sequence[Message]


class SubagentSpawnParams(msgspec.Struct, frozen=True, kw_only=True):
    """Input of the optional `prepare_subagent_spawn`, called before a subagent's first turn.

    It may return a rollback handle (a callable, or an object with `rollback()`; either may be
    async), which Nodmix calls if the spawn fails after the preparation succeeded."""

    parent_session_key: str
    child_session_key: str
    context_mode: Literal["isolated", "fork"] = "isolated"
    transcript_ids: Sequence[str] = ()
    """Session ids of the transcripts the child may draw on (the parent's current one)."""
    transcript_files: Sequence[str] = ()
    """Their files, absolute paths."""
    ttl_seconds: float | None = None
    """How long the child's run may take."""
    run_id: str = ""
    """The subagent run (`sub_...`)."""


class SubagentEndedParams(msgspec.Struct, frozen=True, kw_only=True):
    """Input of the optional `on_subagent_ended`: a subagent's run ended (`completed` or
    `failed`; a timeout or a cancellation is `failed`, with `status` saying which), or its
    finished session was archived (`swept`)."""

    parent_session_key: str
    child_session_key: str
    reason: Literal["completed", "failed", "swept"] = "completed"
    run_id: str = ""
    status: str = ""
    """The run's own status: `completed`, `failed`, `timeout` or `cancelled`."""


OPTIONAL_MEMBERS = (
    "bootstrap",
    "ingest_batch",
    "after_turn",
    "prepare_subagent_spawn",
    "on_subagent_ended",
    "dispose",
)
"""Members an engine may leave out; Nodmix skips a lifecycle point whose member is missing."""


@runtime_checkable
class ContextEngine(Protocol):
    """A context engine. Optional members: `bootstrap`, `ingest_batch`, `after_turn`,
    `prepare_subagent_spawn`, `on_subagent_ended`, `dispose`."""

    @property
    def info(self) -> ContextEngineInfo: ...

    async def ingest(self, params: IngestParams) -> None: ...

    async def assemble(self, params: AssembleParams) -> AssembleResult: ...

    async def compact(self, params: CompactParams) -> CompactResult: ...


class EngineContext(msgspec.Struct, frozen=True, kw_only=True):
    """What an engine factory receives."""

    config: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """The owning plugin's `plugins.entries.<id>.config`."""
    agent_dir: Path | None = None
    """The agent's own state directory, `$NODMIX_STATE_DIR/agents/<agent id>` (a factory is
    called once per agent)."""
    workspace_dir: Path | None = None
    """The agent's workspace."""
    services: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """Runtime services an engine may use (e.g. `compact_with_runtime`)."""


ContextEngineFactory: TypeAlias = Callable[[EngineContext], ContextEngine]
