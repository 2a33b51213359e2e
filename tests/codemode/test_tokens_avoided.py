"""`telemetry.tokensAvoided`: the tool definitions the model was not sent and the nested results
that stayed inside the program, per run, through the real engine and bridge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.catalog import RunCatalog
from nodmix.codemode import CodeModeEngine
from nodmix.context.tokens import chars_to_tokens, estimate_tool_tokens
from nodmix.sessions import SessionManager
from nodmix.tools import ToolContext, ToolResult

from .support import Gate, Harness, build_harness, harness_with, make_tool, text_tool

BIG = "row " * 2000  # 8,000 characters of tool output


async def _big(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult.text(BIG, details={"rows": 2000})


def _harness_tools() -> list[Any]:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
    }
    return [
        make_tool("export_rows", _big, description="Export every row of the table as text."),
        text_tool("lookup", "found", description="Look something up.", parameters=schema),
    ]


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, **kwargs: Any
) -> Harness:
    return await build_harness(engine, sessions, workspace, extra_tools=_harness_tools(), **kwargs)


def _catalog(h: Harness) -> RunCatalog:
    catalog: RunCatalog = h.exec_tool._run.services.catalog
    return catalog


@pytest.mark.anyio
async def test_schema_tokens_are_the_hidden_definitions_minus_exec_and_wait(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    catalog = _catalog(h)
    hidden = estimate_tool_tokens([e.tool.spec for e in catalog.entries])
    shown = estimate_tool_tokens([t.spec for t in h.tools.visible])
    first = (await h.exec("return 1"))["telemetry"]["tokensAvoided"]
    assert first["schemaTokensPerRequest"] == hidden - shown > 0
    assert first["schemaTokens"] == hidden - shown  # one model request so far
    second = (await h.exec("return 2"))["telemetry"]["tokensAvoided"]
    assert second["schemaTokens"] == 2 * (hidden - shown)  # cumulative: one per exec/wait step
    assert second["total"] == second["schemaTokens"] + second["resultTokens"]


@pytest.mark.anyio
async def test_nested_results_kept_in_the_program_count_and_returned_ones_do_not(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    kept = (await h.exec("const r = await tools.export_rows({}); return r.text.length"))[
        "telemetry"
    ]["tokensAvoided"]
    # 8,000 characters reached the program; the model got back a number.
    assert kept["resultTokens"] >= chars_to_tokens(len(BIG)) - 10
    assert kept["resultTokens"] <= chars_to_tokens(len(BIG))

    other = await _harness(engine, sessions, workspace, session_key="agent:main:echo")
    echoed = (await other.exec("return (await tools.export_rows({})).text"))["telemetry"]
    assert echoed["tokensAvoided"]["resultTokens"] == 0  # everything went back to the model


@pytest.mark.anyio
async def test_result_tokens_accumulate_over_exec_and_wait_steps(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate()
    h = await harness_with(
        engine, sessions, workspace, *_harness_tools(), gate.tool, timeout_ms=250
    )
    first = await h.exec("await tools.export_rows({}); await tools.slow({tag: 'x'}); return 1")
    assert first["status"] == "waiting"
    gate.release.set()
    final = await h.wait(first["runId"])
    avoided = final["telemetry"]["tokensAvoided"]
    assert final["status"] == "completed"
    assert avoided["schemaTokens"] == 2 * avoided["schemaTokensPerRequest"]  # exec + wait
    assert avoided["resultTokens"] >= chars_to_tokens(len(BIG)) - 10
    again = (await h.exec("return 0"))["telemetry"]["tokensAvoided"]
    assert again["resultTokens"] >= avoided["resultTokens"] - 1  # the run's total carries on
    assert again["schemaTokens"] == 3 * avoided["schemaTokensPerRequest"]


def test_the_schema_figure_is_computed_once_per_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    import nodmix.catalog.catalog as module

    calls: list[int] = []
    real = module.estimate_tool_tokens

    def counting(specs: Any) -> int:
        calls.append(len(specs))
        return real(specs)

    monkeypatch.setattr(module, "estimate_tool_tokens", counting)
    catalog = RunCatalog.build(_harness_tools())
    catalog.surface_tokens = 10
    for _ in range(3):
        catalog.telemetry()
    assert calls == [2]
    assert (
        catalog.tokens_avoided()["schemaTokensPerRequest"]
        == real([t.spec for t in _harness_tools()]) - 10
    )
