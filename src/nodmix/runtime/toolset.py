"""The tools of one run: core, plugin, MCP and client tools, filtered by policy, and replaced by
the code-mode surface (`exec`/`wait` over a hidden catalog) when code mode is active."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodmix.agents import AgentProfile
from nodmix.catalog import RunCatalog
from nodmix.codemode import (
    VISIBLE_TOOL_NAMES,
    CodeModeEngine,
    CodeModeRun,
    ExecTool,
    RunScope,
    RunServices,
    WaitTool,
    boot_data,
    is_active,
    resolve_settings,
)
from nodmix.codemode.mcp_namespace import MCPAccess, build_mcp_namespace
from nodmix.codemode.namespaces import (
    NamespaceContext,
    NamespaceRegistration,
    build_plugin_namespaces,
)
from nodmix.codemode.nested import NestedRecorder
from nodmix.codemode.runs import NestedCall
from nodmix.config.schema import ToolsConfig
from nodmix.errors import RuntimeUnavailableError
from nodmix.events import EventSink
from nodmix.loop import RunTools
from nodmix.messages import AssistantMessage, ToolCallBlock, ToolResultMessage
from nodmix.sessions import Session
from nodmix.tools import Tool, ToolPolicy, core_tools
from nodmix.tools.base import ToolRunner

log = logging.getLogger("nodmix.codemode")


class ToolProvider(Protocol):
    """A source of tools for a run (plugins, MCP servers, a client)."""

    async def list_tools(self) -> Sequence[Tool]:
        """The tools it offers right now."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsetInputs:
    """What assembling a run's tools needs."""

    tools_config: ToolsConfig
    agent: AgentProfile
    session: Session
    run_id: str
    emit: EventSink
    executor: ToolRunner
    engine: CodeModeEngine
    sources: Sequence[ToolProvider] = ()
    extra_tools: Sequence[Tool] = ()
    namespaces: Sequence[tuple[str, NamespaceRegistration]] = ()
    """Registered plugin namespaces as `(plugin id, registration)`."""
    plugin_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    mcp: MCPAccess | None = None


async def build_run_tools(inputs: ToolsetInputs) -> RunTools:
    """Effective tools after policy; the code-mode surface when it is enabled and tools exist."""
    policy = ToolPolicy.from_config(inputs.tools_config).merged(inputs.agent.tools)
    if policy.disables_tools:
        return RunTools(visible=())
    candidates: list[Tool] = list(core_tools(inputs.tools_config))
    for source in inputs.sources:
        candidates.extend(await source.list_tools())
    candidates.extend(inputs.extra_tools)
    effective = policy.filter(candidates)
    settings = resolve_settings(inputs.agent.code_mode)
    if not is_active(settings, tools_disabled=False, tool_count=len(effective)):
        return RunTools(visible=tuple(effective))
    _require_runtime()
    session = inputs.session
    catalog = RunCatalog.build(effective)
    services = RunServices(
        scope=RunScope(
            agent_id=inputs.agent.id,
            session_key=session.key,
            session_id=session.session_id,
            run_id=inputs.run_id,
        ),
        catalog=catalog,
        executor=inputs.executor,
        workspace=inputs.agent.workspace,
        emit=inputs.emit,
        record=_recorder(session),
    )
    mcp = await build_mcp_namespace(catalog.mcp, inputs.mcp)
    plugin_ns = build_plugin_namespaces(
        inputs.namespaces,
        catalog,
        lambda owner: NamespaceContext(
            agent_id=inputs.agent.id,
            session_key=session.key,
            session_id=session.session_id,
            run_id=inputs.run_id,
            config=inputs.plugin_configs.get(owner, {}),
        ),
    )
    for problem in plugin_ns.errors:
        log.warning("%s", problem)
    mcp_boot = {"descriptor": mcp.descriptor, "api": mcp.api} if mcp.servers else None
    run = CodeModeRun(
        engine=inputs.engine,
        settings=settings,
        services=services,
        boot_json=boot_data(catalog, mcp.files, plugin_ns.descriptors, mcp_boot),
        namespace_targets={**mcp.targets, **plugin_ns.targets},
        mcp_servers=tuple(mcp.servers),
        namespaces=tuple(plugin_ns.prompts),
    )
    return RunTools(
        visible=(ExecTool(run), WaitTool(run)),
        expected_tool_names=VISIBLE_TOOL_NAMES,
        code_mode=True,
    )


def _require_runtime() -> None:
    """Code mode fails closed: without its runtime the run stops instead of exposing tools."""
    from nodmix.sandbox import status

    report = status()
    if not report.installed:
        raise RuntimeUnavailableError(
            f"code mode is enabled but its QuickJS-WASI runtime is unavailable: {report.hint}"
        )


def _recorder(session: Session) -> NestedRecorder:
    def record(parent_call_id: str, call: NestedCall, result: ToolResultMessage) -> None:
        request = AssistantMessage(
            content=(ToolCallBlock(id=call.call_id, name=call.entry.name, arguments=call.input),),
            stop_reason="toolUse",
        )
        session.append_message(request, parent_tool_call_id=parent_call_id)
        session.append_message(result, parent_tool_call_id=parent_call_id)

    return record
