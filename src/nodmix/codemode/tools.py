"""The two model-visible tools of code mode, `exec` and `wait`, for one agent turn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nodmix.codemode.description import (
    WAIT_DESCRIPTION,
    NamespacePrompt,
    exec_description,
    exec_parameters,
    wait_parameters,
)
from nodmix.codemode.engine import CodeModeEngine, log
from nodmix.codemode.nested import RunServices
from nodmix.codemode.results import Result, model_text
from nodmix.codemode.settings import CodeModeSettings
from nodmix.codemode.steps import debug_enabled
from nodmix.messages import JsonObject, TextBlock
from nodmix.tools.base import ToolContext, ToolOrigin, ToolResult, ToolSpec

CONTROL_OWNER = "codemode"
VISIBLE_TOOL_NAMES = frozenset({"exec", "wait"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeModeRun:
    """Everything the two tools of one turn share."""

    engine: CodeModeEngine
    settings: CodeModeSettings
    services: RunServices
    boot_json: str
    namespace_targets: dict[str, Any] = field(default_factory=dict)
    mcp_servers: Sequence[str] = ()
    namespaces: Sequence[NamespacePrompt] = ()


def boot_data(
    run_catalog: Any,
    files: Sequence[dict[str, Any]] = (),
    namespaces: dict[str, Any] | None = None,
    mcp: dict[str, Any] | None = None,
) -> str:
    """The guest's boot JSON: compact catalog, safe names, API files, namespace descriptors and
    the MCP namespace (descriptor plus `$api` data), or null when no MCP tool is visible."""
    data = {
        "tools": [e.compact() for e in run_catalog.visible],
        "safe": {name: e.id for name, e in run_catalog.safe_names().items()},
        "files": list(files),
        "namespaces": namespaces or {},
        "mcp": mcp,
    }
    return json.dumps(data, ensure_ascii=False)


def to_tool_result(result: Result, *, telemetry: bool = False) -> ToolResult:
    """The model reads the compact JSON of what it acts on (`telemetry` too when asked for);
    `details` keeps the whole result, telemetry included."""
    text = model_text(result, telemetry=telemetry)
    return ToolResult(
        content=(TextBlock(text=text),), details=result, is_error=result["status"] == "failed"
    )


class ExecTool:
    """`exec`: run a JavaScript/TypeScript program against the hidden catalog."""

    hook_kind = "code_mode_exec"

    def __init__(self, run: CodeModeRun) -> None:
        self._run = run
        self.spec = ToolSpec(
            name="exec",
            description=exec_description(
                languages=run.settings.languages,
                mcp_servers=run.mcp_servers,
                namespaces=run.namespaces,
            ),
            parameters=exec_parameters(),
            label="code mode",
        )
        self.origin = ToolOrigin(source="nodmix", owner=CONTROL_OWNER, name="exec")

    def hook_input_kind(self, args: JsonObject) -> str:
        """`javascript` or `typescript`, for hook policies."""
        language = args.get("language")
        return language if language in ("javascript", "typescript") else "javascript"

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Run the program."""
        run = self._run
        if debug_enabled():
            source = args.get("code") or args.get("command") or ""
            language = args.get("language") or "javascript"
            log.info("code mode exec %s (%s, %d chars)", ctx.call_id, language, len(str(source)))
        result = await run.engine.exec(
            run.services,
            run.settings,
            run.boot_json,
            dict(args),
            ctx.call_id,
            run.namespace_targets,
        )
        if debug_enabled():
            log.info("code mode exec %s -> %s", ctx.call_id, _outcome(result))
        return to_tool_result(result, telemetry=run.settings.telemetry_to_model)


class WaitTool:
    """`wait`: resume a suspended program."""

    hook_kind = "code_mode_wait"

    def __init__(self, run: CodeModeRun) -> None:
        self._run = run
        self.spec = ToolSpec(
            name="wait", description=WAIT_DESCRIPTION, parameters=wait_parameters(), label="wait"
        )
        self.origin = ToolOrigin(source="nodmix", owner=CONTROL_OWNER, name="wait")

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Resume the run."""
        run = self._run
        result = await run.engine.wait(run.services, dict(args), ctx.call_id, run.namespace_targets)
        if debug_enabled():
            log.info("code mode wait %s -> %s", args.get("runId"), _outcome(result))
        return to_tool_result(result, telemetry=self._run.settings.telemetry_to_model)


def _outcome(result: Result) -> str:
    """`completed`, `waiting <runId>` or `failed <code>`, for the debug log."""
    status = str(result["status"])
    if status == "waiting":
        return f"waiting {result['runId']}"
    if status == "failed":
        return f"failed {result.get('code') or 'guest_error'}"
    return status
