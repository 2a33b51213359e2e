"""Replace a run's tools with the code-mode surface: `exec`/`wait` over a hidden catalog.

Given the run's effective tools (after policy), build the catalog, the `MCP` namespace with its
virtual declaration files, the visible plugin namespaces, and the two model-visible tools.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nodmix.catalog import RunCatalog
from nodmix.codemode.engine import CodeModeEngine
from nodmix.codemode.mcp_namespace import MCPAccess, build_mcp_namespace
from nodmix.codemode.namespaces import (
    NamespaceContext,
    NamespaceRegistration,
    build_plugin_namespaces,
)
from nodmix.codemode.nested import NestedRecorder, RunServices
from nodmix.codemode.runs import NestedCall, RunScope
from nodmix.codemode.settings import CodeModeSettings
from nodmix.codemode.steps import debug_enabled
from nodmix.codemode.tools import CodeModeRun, ExecTool, WaitTool, boot_data
from nodmix.context.tokens import estimate_tool_tokens
from nodmix.errors import RuntimeUnavailableError
from nodmix.events import EventSink
from nodmix.messages import AssistantMessage, Message, ToolCallBlock, ToolResultMessage
from nodmix.tools.base import Tool, ToolRunner

log = logging.getLogger("nodmix.codemode")


async def build_code_mode_tools(
    *,
    effective: Sequence[Tool],
    settings: CodeModeSettings,
    scope: RunScope,
    engine: CodeModeEngine,
    executor: ToolRunner,
    workspace: Any,
    emit: EventSink,
    append: Callable[..., Any],
    namespaces: Sequence[tuple[str, NamespaceRegistration]] = (),
    plugin_configs: Mapping[str, Mapping[str, Any]] | None = None,
    mcp: MCPAccess | None = None,
    external_owners: frozenset[str] = frozenset(),
) -> tuple[Tool, Tool]:
    """The `exec` and `wait` tools of one run. Fails closed if the runtime is missing.
    `external_owners`: plugins installed apart from Nodmix (listed after its own tools)."""
    await require_runtime()
    catalog = RunCatalog.build(effective, external_owners=external_owners)
    if debug_enabled():
        # `NODMIX_DEBUG_CODE_MODE=1`: what the model sees and what went into the hidden catalog.
        telemetry = catalog.telemetry()
        log.info(
            "code mode active for run %s: model tools exec,wait; hidden catalog %d tools %s",
            scope.run_id,
            telemetry["catalogSize"],
            telemetry["sources"],
        )
    services = RunServices(
        scope=scope,
        catalog=catalog,
        executor=executor,
        workspace=workspace,
        emit=emit,
        record=recorder(append),
    )
    mcp_ns = await build_mcp_namespace(catalog.mcp, mcp)
    configs = plugin_configs or {}
    plugin_ns = build_plugin_namespaces(
        namespaces,
        catalog,
        lambda owner: NamespaceContext(
            agent_id=scope.agent_id,
            session_key=scope.session_key,
            session_id=scope.session_id,
            run_id=scope.run_id,
            config=configs.get(owner, {}),
        ),
    )
    for problem in plugin_ns.errors:
        log.warning("%s", problem)
    mcp_boot = {"descriptor": mcp_ns.descriptor, "api": mcp_ns.api} if mcp_ns.servers else None
    run = CodeModeRun(
        engine=engine,
        settings=settings,
        services=services,
        boot_json=boot_data(catalog, mcp_ns.files, plugin_ns.descriptors, mcp_boot),
        namespace_targets={**mcp_ns.targets, **plugin_ns.targets},
        mcp_servers=tuple(mcp_ns.servers),
        namespaces=tuple(plugin_ns.prompts),
    )
    exec_tool, wait_tool = ExecTool(run), WaitTool(run)
    catalog.surface_tokens = estimate_tool_tokens([exec_tool.spec, wait_tool.spec])
    return exec_tool, wait_tool


async def require_runtime() -> None:
    """Code mode needs its runtime: fetch it on first use (one line on stderr says so); if that
    fails the run stops instead of exposing tools (fails closed with the fix)."""
    from nodmix.sandbox import status

    if status().installed:
        return
    import anyio

    from nodmix.sandbox.firstuse import ensure_installed

    try:
        await anyio.to_thread.run_sync(ensure_installed, _announce)
    except RuntimeUnavailableError as exc:
        raise RuntimeUnavailableError(
            f"code mode is enabled but its QuickJS-WASI runtime is unavailable: {exc}"
        ) from None


def _announce(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def recorder(append: Callable[..., Any]) -> NestedRecorder:
    """Projects delivered nested calls into the transcript under their parent call."""

    def record(parent_call_id: str, call: NestedCall, result: ToolResultMessage) -> None:
        request: Message = AssistantMessage(
            content=(ToolCallBlock(id=call.call_id, name=call.entry.name, arguments=call.input),),
            stop_reason="toolUse",
        )
        append(request, parent_tool_call_id=parent_call_id)
        append(result, parent_tool_call_id=parent_call_id)

    return record
