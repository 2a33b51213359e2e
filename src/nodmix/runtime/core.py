"""The composition root: config in, a running Nodmix out.

`Runtime` is the only place that knows the concrete classes. It owns every long-lived resource
(provider HTTP clients, MCP connections, the code-mode engine and its suspended runs, the session
manager) through one `AsyncExitStack`, and runs turns for the CLI and the gateway alike.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from nodmix.agents import AgentProfile, agent_ids, resolve_agent
from nodmix.automation.tool import CronTools
from nodmix.channels.tool import MessageTools
from nodmix.checkpoints.store import open_checkpoint_store
from nodmix.compaction.service import CompactionService, SessionCompaction, flush_runner
from nodmix.config import LoadedConfig, load_config
from nodmix.config import paths as config_paths
from nodmix.context.base import ContextEngine
from nodmix.context.legacy import LEGACY_ENGINE_ID, legacy_factory
from nodmix.context.lifecycle import Bootstrapper
from nodmix.context.sdk import COMPACT_SERVICE
from nodmix.errors import SessionError
from nodmix.events import EventSink, discard
from nodmix.memory.tools import MemoryTools
from nodmix.messages import UserMessage
from nodmix.observability import TurnObserver, open_log_file
from nodmix.origin import TurnOrigin
from nodmix.plugins import PluginRegistry, PluginStatus, load_plugins
from nodmix.plugins.registry import CORE_OWNER
from nodmix.providers.retry import RetryPolicy
from nodmix.providers.router import ProviderRouter, default_model_ref
from nodmix.runtime.automation_turns import open_automation
from nodmix.runtime.cache import ConfigCache
from nodmix.runtime.channel_access import LazyChannels, open_channels
from nodmix.runtime.client_results import ClientTurn
from nodmix.runtime.commands import chat_command
from nodmix.runtime.engines import ContextEngines
from nodmix.runtime.limits import raise_open_file_limit
from nodmix.runtime.mcp_holder import McpHolder, open_mcp
from nodmix.runtime.media import media_prompt, open_media
from nodmix.runtime.memory import MemoryBackends, open_memory
from nodmix.runtime.outcomes import CommandOutcome, TurnOutcome
from nodmix.runtime.security import LazySecurity
from nodmix.runtime.toolset import PluginTools, ToolProvider, open_code_mode_engine
from nodmix.runtime.turns import run_agent_turn
from nodmix.runtime.usage_flush import UsageFlusher
from nodmix.runtime.web import open_web_tools
from nodmix.sessions import Session, SessionManager, resolve_session_key
from nodmix.sessions.files import private_dirs
from nodmix.skills import SkillBook
from nodmix.state.backend import FileState, StateBackend, open_state
from nodmix.subagents.wiring import open_subagents
from nodmix.tools import core_tools
from nodmix.tools.core.background import stop_background_jobs
from nodmix.tools.executor import ToolExecutor

if TYPE_CHECKING:
    from nodmix.automation.service import Automation
    from nodmix.channels.manager import ChannelManager
    from nodmix.codemode.engine import CodeModeEngine
    from nodmix.media.files import InboundFile
    from nodmix.media.service import MediaService
    from nodmix.security.parts import SecurityParts

log = logging.getLogger("nodmix.runtime")


class Runtime:
    """A running Nodmix: use `async with Runtime.open() as runtime`."""

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        env: Mapping[str, str],
        state_dir: Path,
        registry: PluginRegistry,
        plugin_statuses: list[PluginStatus],
        router: ProviderRouter,
        sessions: SessionManager,
        background: TaskGroup,
        tool_sources: Sequence[ToolProvider],
        retry: RetryPolicy | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.env = env
        self.state_dir = state_dir
        self.registry = registry
        self.plugin_statuses = plugin_statuses
        self.router = router
        self.sessions = sessions
        self.background = background
        self.usage = UsageFlusher(sessions, background)  # token counters soon after turns
        self._engine: CodeModeEngine | None = None
        self.tool_sources = list(tool_sources)
        self.executor = ToolExecutor(registry.hooks)
        self._cache = ConfigCache(lambda: self.config)
        """Agent profiles, core tools and skills prompts of the current config."""
        self._security = LazySecurity(state_dir, lambda: self.config)
        self.executor.gate = self._security
        self.retry = retry
        self._bootstrapper = Bootstrapper()
        self.compaction = CompactionService(
            models=router,
            sessions=sessions,
            hooks=registry.hooks,
            providers=lambda: {k: o.value for k, o in registry.compaction_providers.items()},
            agent_for_key=lambda key: self.agent(resolve_session_key(key).agent_id),
            model_refs=self.model_refs,
            flush=lambda: flush_runner(router, self.executor, core_tools(self.config.tools)),
            checkpoints=open_checkpoint_store(state_dir),
        )
        self.services: dict[str, Any] = {COMPACT_SERVICE: self.compaction.compact_with_runtime}
        self._context_engines = ContextEngines(
            lambda: self.config, lambda: self.registry, state_dir=state_dir, services=self.services
        )
        self.memory_backends = MemoryBackends(
            lambda: self.config, lambda: self.registry, self.agent, state_dir=state_dir
        )
        """The memory backend `plugins.slots.memory` selects, per agent."""
        self.mcp_holder: McpHolder | None = None
        self.skills = SkillBook(state_dir=state_dir)
        self.retired: list[Callable[[], Awaitable[None]]] = []
        """Closers of parts a config reload replaced (run at shutdown; turns may hold them)."""
        self._channels: ChannelManager | None = None
        self.channel_access = LazyChannels(lambda: self.config, lambda: self.channels)
        """What tools and automation use of the channels (no import until one is used)."""
        self.tool_sources.append(MessageTools(self.channel_access))
        self.observer = TurnObserver()
        """Logs run events and keeps the metrics the gateway serves at `/metrics`."""
        self._automation: Automation | None = None
        self.inline_skill_scans = False
        """Scan skills on the event loop even when the last scan was slow (see `open`)."""
        self.tool_sources.append(
            CronTools(lambda: self.automation.store, channels=self.channel_access)
        )
        self._media: MediaService | None = None
        self.subagents = open_subagents(self, state_dir, background, self.tool_sources)
        self.state: StateBackend = FileState(state_dir)
        """Files, or the database replicas share (`state.backend`); set by `open`."""

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        loaded: LoadedConfig | None = None,
        *,
        env: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        extra_sources: Sequence[ToolProvider] = (),
        one_conversation: bool = False,
    ) -> AsyncIterator[Runtime]:
        """Build every part from config and close them all on exit. `one_conversation`: the
        process serves a single chat (the CLI), so nothing else waits on its event loop and
        skill scans run there, starting no worker thread."""
        env = dict(os.environ if env is None else env)
        loaded = loaded or load_config(env=env)
        state_dir = config_paths.ensure_state_dir(config_paths.state_dir(env))
        raise_open_file_limit()
        registry = PluginRegistry()
        registry.add_context_engine(CORE_OWNER, LEGACY_ENGINE_ID, legacy_factory)
        statuses = load_plugins(
            loaded.config.plugins, registry, base_dir=loaded.path.parent, state_dir=state_dir
        )
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(open_log_file(state_dir))
            state = open_state(
                loaded.config,
                env,
                state_dir,
                file=str(loaded.path),
                role="agent" if one_conversation else "gateway",
            )
            stack.callback(state.close)
            router = ProviderRouter(loaded.config.models, env)
            stack.push_async_callback(router.aclose)
            sessions = SessionManager(state_dir, backend=state.sessions())
            stack.callback(sessions.close)
            stack.callback(stop_background_jobs)  # `exec` with `background: true`
            background = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(background.cancel_scope.cancel)  # runs before the group is exited
            memory = open_memory(loaded.config, env, state_dir, registry)
            stack.callback(memory.close)
            sources: list[ToolProvider] = [
                MemoryTools(
                    memory.settings, lambda agent: runtime.memory_backends.for_agent(agent)
                ),
                PluginTools(registry),
            ]
            holder = await open_mcp(loaded.config.mcp.servers, env, background)
            if holder is not None:
                sources.append(holder.manager)
            sources.extend(extra_sources)
            runtime = cls(
                loaded,
                env=env,
                state_dir=state_dir,
                registry=registry,
                plugin_statuses=statuses,
                router=router,
                sessions=sessions,
                background=background,
                tool_sources=sources,
                retry=retry,
            )
            runtime.state = state
            open_web_tools(runtime, stack)  # web_search and browser, when configured
            runtime.services["mcp"] = holder.manager if holder is not None else None
            runtime.services["memory"] = memory
            runtime.mcp_holder = holder
            runtime.inline_skill_scans = one_conversation
            runtime._security.attach(background)
            stack.push_async_callback(runtime._close_replaceable)  # before background stops
            stack.push_async_callback(runtime.subagents.flush)  # ditto
            try:
                yield runtime
            finally:
                await runtime._context_engines.dispose()
                if runtime._engine is not None:
                    runtime._engine.shutdown()

    @property
    def automation(self) -> Automation:
        """Cron jobs, run history, heartbeat and webhook runs (the gateway runs the loops),
        created on first use: the `cron` tool's first call or the gateway's start."""
        if self._automation is None:
            self._automation = open_automation(self)
        return self._automation

    @property
    def security(self) -> SecurityParts:
        """Exec policy, allowlist and approval requests (`nodmix.security`), built on first
        use: the first `exec` call, or the first part that asks for them."""
        return self._security.parts

    def when_security(self, setup: Callable[[SecurityParts], None]) -> None:
        """Run `setup` on the security parts once they exist, without building them now (an
        approval presenter for a run that may never ask for an approval)."""
        self._security.when_built(setup)

    @property
    def channels(self) -> ChannelManager:
        """Chat channels (`channels.*`), created on first use; the gateway runs them. Approval
        requests of channel turns are posted to their chat, and `/approve` answers there."""
        if self._channels is None:
            self._channels = open_channels(
                lambda: self.config,
                env=self.env,
                state_dir=self.state_dir,
                security=self.security,
                media=self.media,
            )
            if self.state.kind != "files":  # one replica polls each bot
                self._channels.singleton = self.state.coordination.run_singleton
        return self._channels

    @property
    def media(self) -> MediaService:
        """Images, transcription, speech and per-chat `/tts` (`nodmix.media`), on first use."""
        if self._media is None:
            self._media = open_media(lambda: self.config, lambda: self.router, self.state_dir)
        return self._media

    @property
    def engine(self) -> CodeModeEngine:
        """The code-mode engine, created on first use (plain runs never import it)."""
        if self._engine is None:
            self._engine = open_code_mode_engine(self.config, self.state_dir, self.background)
        return self._engine

    def retire(self) -> None:
        """The process is stopping: code-mode runs of turns cancelled from now on are kept
        for the next start instead of being aborted."""
        if self._engine is not None:
            self._engine.retire()

    # ---- agents, models, engines --------------------------------------------------------------

    def agent(self, agent_id: str | None = None) -> AgentProfile:
        """A resolved agent profile (`main` by default), resolved once per config."""
        wanted = agent_id or config_paths.DEFAULT_AGENT_ID
        return self._cache.get(
            ("agent", wanted), lambda: resolve_agent(self.config, wanted, env=self.env)
        )

    def agent_ids(self) -> list[str]:
        """Configured agent ids."""
        return agent_ids(self.config)

    def model_refs(self, agent: AgentProfile, override: str | None = None) -> tuple[str, ...]:
        """Primary model (or the override) then the fallbacks, each checked to resolve."""
        primary = override or default_model_ref(agent.model, self.env)
        refs = tuple(dict.fromkeys((primary, *agent.fallbacks)))
        for ref in refs:
            self.router.model_spec(ref)  # unknown providers/models fail before the turn starts
        return refs

    def context_engine(self, agent: AgentProfile | None = None) -> ContextEngine:
        """The engine `plugins.slots.contextEngine` selects (`legacy` by default), created for
        `agent` (the default agent when `None`) with its directory and workspace."""
        return self._context_engines.selected(agent or self.agent())

    @property
    def engine_failures(self) -> dict[str, str]:
        """Latest failure per context engine id (for `nodmix doctor`)."""
        return self._context_engines.failures

    def retire_engines(self) -> None:
        """Drop cached context engines (a reload changed plugins); dispose them at shutdown."""
        self._context_engines.retire(self.retired)

    async def _close_replaceable(self) -> None:
        if self.mcp_holder is not None:
            await self.mcp_holder.close()
        for close in reversed(self.retired):
            with contextlib.suppress(Exception):
                await close()
        self.retired.clear()

    # ---- sessions ------------------------------------------------------------------------------

    def session_key(self, agent: AgentProfile, session_key: str | None) -> str:
        """Full session key for an agent (`agent:<id>:main` by default; bare names allowed)."""
        key = resolve_session_key(session_key, default_agent_id=agent.id)
        if key.agent_id != agent.id:
            raise SessionError(
                f"session key {str(key)!r} belongs to agent {key.agent_id!r}, not {agent.id!r}"
            )
        return str(key)

    def open_session(self, agent: AgentProfile, session_key: str | None) -> Session:
        """Open (or create) a session of an agent."""
        private_dirs(agent.workspace)  # an existing workspace keeps its mode
        return self.sessions.open(self.session_key(agent, session_key), workspace=agent.workspace)

    async def open_session_async(self, agent: AgentProfile, session_key: str | None) -> Session:
        """`open_session` for the event loop (a database's round trips run off the loop)."""
        private_dirs(agent.workspace)
        key = self.session_key(agent, session_key)
        return await self.sessions.open_async(key, workspace=agent.workspace)

    # ---- turns ---------------------------------------------------------------------------------

    async def submit(
        self,
        text: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        emit: EventSink = discard,
        model: str | None = None,
        disable_tools: bool = False,
        origin: TurnOrigin | None = None,
        client: ClientTurn | None = None,
        files: Sequence[InboundFile] = (),
    ) -> TurnOutcome | CommandOutcome:
        """A chat message: a `/command` or a turn (`client`: tools and results of the
        application that sent it; with results, `text` is ignored and the turn continues;
        `files`: saved in the workspace with it, images and voice notes among them)."""
        stripped = text.strip() if client is None or client.results is None else ""
        done = await chat_command(self, stripped, agent_id, session_key, emit, origin)
        if done is not None:
            return done
        prompt = await media_prompt(self, text, files, agent_id, session_key, model)
        if isinstance(prompt, CommandOutcome):
            return prompt
        return await self.run_turn(
            text,
            agent_id=agent_id,
            session_key=session_key,
            emit=emit,
            model=model,
            disable_tools=disable_tools,
            origin=origin,
            client=client,
            prompt=prompt,
        )

    def new_session(
        self, *, agent_id: str | None = None, session_key: str | None = None
    ) -> CommandOutcome:
        """`/new`: start a fresh transcript under the same key (the old one stays on disk)."""
        agent = self.agent(agent_id)
        key = self.session_key(agent, session_key)
        session = self.sessions.reset(key, workspace=agent.workspace)
        return CommandOutcome(
            command="new",
            message="Started a new session.",
            session_key=key,
            session_id=session.session_id,
        )

    async def compact_session(
        self,
        agent_id: str | None,
        session_key: str | None,
        instructions: str | None = None,
        *,
        emit: EventSink = discard,
    ) -> SessionCompaction:
        """Compact a session now (`/compact`, `nodmix sessions compact`, `sessions.compact`).

        Waits up to 15 s for a turn running on the session to finish.

        Raises:
            SessionError: the session does not exist, or a turn kept it busy too long.
            PluginError: the context engine cannot be resolved or broke its contract.
        """
        if agent_id is None and session_key and session_key.startswith("agent:"):
            agent_id = resolve_session_key(session_key).agent_id
        agent = self.agent(agent_id)
        key = self.session_key(agent, session_key)
        engine = self.context_engine(agent)
        return await self.compaction.compact_session(
            engine,
            agent=agent,
            session_key=key,
            refs=self.model_refs(agent),
            instructions=instructions,
            emit=emit,
            prepare=lambda session: self._bootstrapper.bootstrap(engine, session),
        )

    async def run_turn(
        self,
        text: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        emit: EventSink = discard,
        model: str | None = None,
        disable_tools: bool = False,
        origin: TurnOrigin | None = None,
        client: ClientTurn | None = None,
        prompt: UserMessage | None = None,
    ) -> TurnOutcome:
        """Run one agent turn on a session; a second turn on the same session waits.

        `disable_tools` runs the turn with no tools at all (the model just answers); code mode
        then stays off too. `prompt` replaces the plain text message (images, transcripts).
        """
        return await run_agent_turn(
            self,
            text,
            agent_id=agent_id,
            session_key=session_key,
            emit=emit,
            model=model,
            disable_tools=disable_tools,
            origin=origin,
            client=client,
            prompt=prompt,
            turns=self._security.turns,
            engine=lambda: self._engine,
            cache=self._cache,
            bootstrapper=self._bootstrapper,
        )
