"""The tools of one run: core, plugin, MCP and client tools, filtered by policy, and replaced by
the code-mode surface (`exec`/`wait` over a hidden catalog) when code mode is active.

Code mode is imported only for runs that use it, so plain runs start faster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from nodmix.agents import AgentProfile
from nodmix.codemode.settings import is_active, resolve_settings
from nodmix.config.schema import NodmixConfig, ToolsConfig
from nodmix.events import EventSink
from nodmix.loop import RunTools
from nodmix.origin import TurnOrigin
from nodmix.runtime.cache import ConfigCache
from nodmix.security.workspace_guard import DEFAULT_ACCESS
from nodmix.sessions import Session
from nodmix.tools import Tool, ToolPolicy, core_tools
from nodmix.tools.base import ToolRunner
from nodmix.tools.deferred import is_deferred
from nodmix.tools.isolation import Isolation

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from nodmix.codemode.engine import CodeModeEngine
    from nodmix.codemode.mcp_namespace import MCPAccess
    from nodmix.codemode.namespaces import NamespaceRegistration
    from nodmix.plugins import PluginRegistry

VISIBLE_CODE_MODE_TOOLS = frozenset({"exec", "wait"})


class ToolProvider(Protocol):
    """A source of tools for a run (plugins, MCP servers, a client)."""

    async def list_tools(self) -> Sequence[Tool]:
        """The tools it offers right now."""
        ...


class PluginTools:
    """The plugin registry's tools as a tool source."""

    def __init__(self, registry: PluginRegistry) -> None:
        self._registry = registry

    async def list_tools(self) -> Sequence[Tool]:
        return self._registry.plugin_tools()


class ToolsetInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What assembling a run's tools needs."""

    tools_config: ToolsConfig
    agent: AgentProfile
    session: Session
    run_id: str
    emit: EventSink
    executor: ToolRunner
    engine: Callable[[], CodeModeEngine]
    """Gives the code-mode engine; only called when code mode is active."""
    sources: Sequence[ToolProvider] = ()
    extra_tools: Sequence[Tool] = ()
    namespaces: Sequence[tuple[str, NamespaceRegistration]] = ()
    """Registered plugin namespaces as `(plugin id, registration)`."""
    more_namespaces: Callable[[], Sequence[tuple[str, NamespaceRegistration]]] | None = None
    """Further namespaces, asked for only when code mode is active (building them imports the
    namespace machinery, which plain runs skip)."""
    plugin_configs: Mapping[str, Mapping[str, Any]] = msgspec.field(default_factory=dict)
    external_plugins: frozenset[str] = frozenset()
    """Ids of plugins installed apart from Nodmix (the catalog lists them after its own)."""
    mcp: MCPAccess | None = None
    disable_tools: bool = False
    """A run that asked for no tools at all (`--no-tools`, `disableTools`, `tool_choice: none`)."""
    code_mode_tools: Sequence[Tool] = ()
    """Tools that join the hidden catalog only when code mode is active (the `skills` ones)."""
    read_roots: Sequence[Path] = ()
    """Folders outside the workspace that `read` may read (the offered skills' folders)."""
    exec_env: Mapping[str, str] = msgspec.field(default_factory=dict)
    """Variables the offered skills' settings add to `exec` commands."""
    tool_choice: str | None = None
    """`required` or a tool name for the turn's first model call (see `RunTools.tool_choice`);
    in code mode a named tool is called from a program, so the choice becomes `exec`."""
    origin: TurnOrigin | None = None
    """The chat the turn answers; code-mode nested calls carry it like direct calls."""
    protected: tuple[Path, ...] | None = None
    """Config file, plugin and skill folders that turns which do not speak for the owner may
    not write when they lie in the workspace (`workspace_guard.instruction_sources`)."""
    cache: ConfigCache | None = None
    """Where the core tools built for `tools_config` are kept between turns (the runtime's,
    valid until a config reload); without one they are built for this run alone."""
    session_policy: ToolPolicy | None = None
    """A further policy for this session, applied after the agent's (a subagent's
    `subagents.tools`, no `sessions_spawn` past `maxDepth`)."""


async def build_run_tools(inputs: ToolsetInputs) -> RunTools:
    """Effective tools after policy; the code-mode surface when it is enabled and tools exist."""
    policy = ToolPolicy.from_config(inputs.tools_config).merged(inputs.agent.tools)
    if inputs.disable_tools or policy.disables_tools:
        return RunTools(visible=())
    candidates: list[Tool] = list(_core_tools(inputs))
    for source in inputs.sources:
        candidates.extend(await source.list_tools())
    candidates.extend(inputs.extra_tools)
    effective = policy.filter(candidates)
    sandboxed = sandbox_policy_for(
        inputs.tools_config, inputs.agent, inputs.session.key, inputs.origin
    )
    # The session's own policy (a subagent's), then the sandbox tool policy.
    narrower = [p for p in (inputs.session_policy, sandboxed) if p is not None]
    for extra in narrower:
        effective = extra.filter(effective)
    settings = resolve_settings(inputs.agent.code_mode)
    if not is_active(settings, tools_disabled=inputs.disable_tools, tool_count=len(effective)):
        return RunTools(visible=_app_wins(effective), tool_choice=inputs.tool_choice)
    more = policy.filter(list(inputs.code_mode_tools))
    for extra in narrower:
        more = extra.filter(more)
    effective = [*effective, *more]
    from nodmix.codemode.runs import RunScope
    from nodmix.codemode.surface import build_code_mode_tools

    session = inputs.session
    engine = inputs.engine()
    visible = await build_code_mode_tools(
        effective=effective,
        settings=settings,
        scope=RunScope(
            agent_id=inputs.agent.id,
            session_key=session.key,
            session_id=session.session_id,
            run_id=inputs.run_id,
            origin=inputs.origin,
        ),
        engine=engine,
        executor=inputs.executor,
        workspace=inputs.agent.workspace,
        emit=inputs.emit,
        append=session.append_message,
        namespaces=[
            *inputs.namespaces,
            *(inputs.more_namespaces() if inputs.more_namespaces is not None else ()),
        ],
        plugin_configs=inputs.plugin_configs,
        mcp=inputs.mcp,
        external_owners=inputs.external_plugins,
    )
    choice = inputs.tool_choice
    return RunTools(
        visible=visible,
        expected_tool_names=VISIBLE_CODE_MODE_TOOLS,
        code_mode=True,
        tool_choice=choice if choice in (None, "required") else "exec",
        held=lambda: engine.client_calls.for_turn(inputs.run_id),
        on_result=engine.recorded,
    )


def _core_tools(inputs: ToolsetInputs) -> Sequence[Tool]:
    """The core tools under the config, the skills' read roots and `exec` variables; reused
    from the cache while those stay the same (a sandboxed agent's are built per run)."""
    isolation = agent_isolation(inputs.agent, inputs.protected)
    access = inputs.agent.sandbox.workspace_access or DEFAULT_ACCESS

    def build() -> tuple[Tool, ...]:
        return tuple(
            core_tools(
                inputs.tools_config,
                read_roots=inputs.read_roots,
                exec_env=inputs.exec_env,
                isolation=isolation,
                workspace_access=access,
                protected=inputs.protected,
            )
        )

    if inputs.cache is None or isolation is not None:
        return build()
    key = (
        "core_tools",
        tuple(inputs.read_roots),
        tuple(sorted(inputs.exec_env.items())),
        access,
        inputs.protected,
    )
    return inputs.cache.get(key, build)


def sandbox_policy_for(
    tools_config: ToolsConfig,
    agent: AgentProfile,
    session_key: str,
    origin: TurnOrigin | None,
) -> ToolPolicy | None:
    """The sandbox tool policy (`tools.sandbox.tools`) when the turn is sandboxed, else None
    (nothing of the sandbox is imported for an agent whose mode is off)."""
    mode = agent.sandbox.mode or "off"
    if mode == "off":
        return None
    from nodmix.security.sandbox.policy import is_sandboxed

    if not is_sandboxed(mode, agent.id, session_key, origin):
        return None
    from nodmix.tools.sandbox_policy import sandbox_tool_policy

    return sandbox_tool_policy(tools_config, agent.tools)


def agent_isolation(
    agent: AgentProfile, protected: tuple[Path, ...] | None = None
) -> Isolation | None:
    """The agent's sandbox, or None when its mode is off (then the sandbox's modules, and the
    guarded HTTP transport they bring, are never imported)."""
    if (agent.sandbox.mode or "off") == "off":
        return None
    from nodmix.security.sandbox.session import SessionSandbox

    return SessionSandbox.for_agent(agent, protected)


def _app_wins(tools: Sequence[Tool]) -> tuple[Tool, ...]:
    """Direct mode: an app's own function hides an agent tool of the same name (the model
    sees one tool per name; the app asked for its own). In code mode both stay, under their
    different catalog ids."""
    app_names = {t.spec.name for t in tools if is_deferred(t)}
    return tuple(t for t in tools if is_deferred(t) or t.spec.name not in app_names)


def open_code_mode_engine(
    config: NodmixConfig, state_dir: Path, group: TaskGroup
) -> CodeModeEngine:
    """The code-mode engine with the run store `tools.codeMode.runStore` names (imported only
    when a run uses code mode)."""
    from nodmix.codemode.engine import CodeModeEngine
    from nodmix.codemode.run_files import open_run_store

    kind = getattr(config.tools.code_mode, "run_store", None) or "file"
    return CodeModeEngine(open_run_store(kind, state_dir), group=group)
