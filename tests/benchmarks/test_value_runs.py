"""The surface and workflow benchmarks run end to end and measure what they say."""

from __future__ import annotations

import pytest
from benchmarks.value import surface
from benchmarks.value.catalog import catalog_tools
from benchmarks.value.run_workflows import return_one, run_mode
from benchmarks.value.workflows import WORKFLOWS

from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer

pytestmark = pytest.mark.integration


@pytest.mark.anyio
async def test_surface_measures_the_real_payloads() -> None:
    tools = catalog_tools(50)
    specs = await surface.code_mode_specs(tools)
    assert [s.name for s in specs] == ["exec", "wait"]
    assert "MCP servers (everything, time)" in specs[0].description
    direct = surface.measure([t.spec for t in tools], code_mode=False)
    code = surface.measure(specs, code_mode=True)
    assert direct["tools"] == 50 and code["tools"] == 2
    assert code["request_tokens"] <= surface.TARGET_MAX_TOKENS < direct["tools_tokens"]
    body = surface.payload(specs, code_mode=True)
    assert [t["function"]["name"] for t in body["tools"]] == ["exec", "wait"]


@pytest.mark.anyio
async def test_both_modes_reach_the_same_facts_through_the_real_loop() -> None:
    chosen = [w for w in WORKFLOWS if w.name in ("join", "overdue")]
    async with ScriptedModelServer(lambda request: ModelReply.text("idle")) as server:
        direct = await run_mode(server, 50, code_mode=False, workflows=chosen)
        code = await run_mode(server, 50, code_mode=True, workflows=chosen)
    for workflow in chosen:
        d, c = direct[workflow.name], code[workflow.name]
        assert d["facts"] == c["facts"] and d["facts"]
        assert c["input_tokens"] < d["input_tokens"]
        assert c["requests"] == 3 and c["search_misses"] == []
        assert c["tokens_avoided"]["total"] > 0
        # The compact result format: the model reads less than the old indented full result.
        sizes = c["result_size"]
        assert sizes["calls"] == 2 and 0 < sizes["after_chars"] < sizes["before_chars"]
    assert direct["join"]["requests"] == 3 and direct["join"]["tool_calls"] == 6
    assert direct["overdue"]["requests"] == 4  # three pages, then the answer
    # The late invoices: every page was read, the facts are the aggregate, not the pages.
    assert direct["overdue"]["facts"]["count"] > 50


@pytest.mark.anyio
async def test_exec_return_1_costs_the_model_at_most_40_characters() -> None:
    async with ScriptedModelServer(lambda request: ModelReply.text("idle")) as server:
        sizes = await return_one(server)
    assert sizes["calls"] == 1
    assert sizes["after_chars"] == len('{"status":"completed","value":1}') <= 40
    assert sizes["before_chars"] > 10 * sizes["after_chars"]  # indented, with telemetry
