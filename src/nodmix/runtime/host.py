"""What the runtime's parts see of the running `Runtime`: a protocol, so the modules that run
turns, chat commands, reloads and automation point down to it, and only the composition root
(`core.py`) knows the class that fulfils it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from nodmix.agents import AgentProfile
    from nodmix.codemode.engine import CodeModeEngine
    from nodmix.compaction.service import CompactionService, SessionCompaction
    from nodmix.config import LoadedConfig
    from nodmix.config.schema import NodmixConfig
    from nodmix.context.base import ContextEngine
    from nodmix.events import EventSink
    from nodmix.media.files import InboundFile
    from nodmix.media.service import MediaService
    from nodmix.observability import TurnObserver
    from nodmix.origin import TurnOrigin
    from nodmix.plugins import PluginRegistry, PluginStatus
    from nodmix.providers.retry import RetryPolicy
    from nodmix.providers.router import ProviderRouter
    from nodmix.runtime.channel_access import LazyChannels
    from nodmix.runtime.client_results import ClientTurn
    from nodmix.runtime.mcp_holder import McpHolder
    from nodmix.runtime.memory import MemoryBackends
    from nodmix.runtime.outcomes import CommandOutcome, TurnOutcome
    from nodmix.runtime.toolset import ToolProvider
    from nodmix.runtime.usage_flush import UsageFlusher
    from nodmix.security.parts import SecurityParts
    from nodmix.sessions import Session, SessionManager
    from nodmix.skills import SkillBook
    from nodmix.subagents.service import Subagents
    from nodmix.tools.executor import ToolExecutor


class RuntimeHost(Protocol):
    """A running Nodmix (`nodmix.runtime.core.Runtime`), as its parts use it."""

    loaded: LoadedConfig
    config: NodmixConfig
    env: Mapping[str, str]
    state_dir: Path
    registry: PluginRegistry
    plugin_statuses: list[PluginStatus]
    router: ProviderRouter
    sessions: SessionManager
    background: TaskGroup
    usage: UsageFlusher
    tool_sources: list[ToolProvider]
    executor: ToolExecutor
    retry: RetryPolicy | None
    compaction: CompactionService
    services: dict[str, Any]
    mcp_holder: McpHolder | None
    skills: SkillBook
    retired: list[Callable[[], Awaitable[None]]]
    channel_access: LazyChannels
    observer: TurnObserver
    inline_skill_scans: bool
    memory_backends: MemoryBackends
    subagents: Subagents

    @property
    def engine(self) -> CodeModeEngine: ...

    @property
    def security(self) -> SecurityParts: ...

    @property
    def media(self) -> MediaService: ...

    def agent(self, agent_id: str | None = None) -> AgentProfile: ...

    def model_refs(self, agent: AgentProfile, override: str | None = None) -> tuple[str, ...]: ...

    def context_engine(self, agent: AgentProfile | None = None) -> ContextEngine: ...

    def retire_engines(self) -> None: ...

    def session_key(self, agent: AgentProfile, session_key: str | None) -> str: ...

    def open_session(self, agent: AgentProfile, session_key: str | None) -> Session: ...

    async def open_session_async(self, agent: AgentProfile, session_key: str | None) -> Session: ...

    def new_session(
        self, *, agent_id: str | None = None, session_key: str | None = None
    ) -> CommandOutcome: ...

    async def compact_session(
        self,
        agent_id: str | None,
        session_key: str | None,
        instructions: str | None = None,
        *,
        emit: EventSink = ...,
    ) -> SessionCompaction: ...

    async def submit(
        self,
        text: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        emit: EventSink = ...,
        model: str | None = None,
        disable_tools: bool = False,
        origin: TurnOrigin | None = None,
        client: ClientTurn | None = None,
        files: Sequence[InboundFile] = (),
    ) -> TurnOutcome | CommandOutcome: ...
