"""The guest API inside the real QuickJS-WASI sandbox: `ALL_TOOLS`, `tools`, `text`, `json`,
`yield_control`, the `code`/`command` input, JSON safety and what the guest cannot reach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.sessions import SessionManager
from nodmix.tools import ToolContext, ToolResult

from .support import Harness, build_harness, make_tool, text_tool


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, **kwargs: Any
) -> Harness:
    extra = [
        text_tool("lookup", "looked up", description="Look a word up in the glossary."),
        text_tool("search", "shadow", owner="shadowing"),
        text_tool("dup", "from a", owner="alpha"),
        text_tool("dup", "from b", owner="beta"),
        text_tool("web-search", "dashed", owner="web"),
        text_tool("pick_file", "picked", owner="app", source="client"),
    ]
    return await build_harness(engine, sessions, workspace, extra_tools=extra, **kwargs)


@pytest.mark.anyio
async def test_all_tools_is_a_compact_frozen_list_without_schemas(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const read = ALL_TOOLS.find(t => t.id === 'nodmix:core:read');
        const pick = ALL_TOOLS.find(t => t.id === 'client:app:pick_file');
        let pushed = 'accepted';
        try { ALL_TOOLS.push({ id: 'forged' }); } catch (e) { pushed = e.name; }
        return { read, pick, pushed, frozen: Object.isFrozen(ALL_TOOLS) && Object.isFrozen(read),
                 count: ALL_TOOLS.length, anySchema: ALL_TOOLS.some(t => 'parameters' in t) };
        """
    )
    assert value["read"] == {
        "id": "nodmix:core:read",
        "name": "read",
        "label": "Read file",
        "description": value["read"]["description"],
        "source": "nodmix",
        "sourceName": "core",
    }
    assert value["pick"]["source"] == "client" and value["pick"]["sourceName"] == "app"
    assert value["frozen"] is True and value["anySchema"] is False
    assert value["pushed"] == "TypeError"
    assert value["count"] == 5 + 6  # core tools plus the six extras; the push was refused


@pytest.mark.anyio
async def test_convenience_functions_exist_only_for_unambiguous_safe_names(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const names = Object.keys(tools).sort();
        const viaShortcut = await tools.lookup({ word: 'x' });
        const searchIsHelper = Array.isArray(await tools.search('glossary'));
        let ambiguous;
        try { await tools.call('dup', {}); } catch (e) { ambiguous = e.message; }
        const byId = await tools.call('nodmix:beta:dup', {});
        return { names, shortcut: viaShortcut.text, searchIsHelper, ambiguous, byId: byId.text,
                 proto: Object.getPrototypeOf(tools), frozen: Object.isFrozen(tools) };
        """
    )
    assert value["names"] == sorted(
        ["search", "describe", "call", "lookup", "pick_file", "exec", "read", "write", "edit"]
        + ["web_fetch"]
    )
    assert value["shortcut"] == "looked up"
    assert value["searchIsHelper"] is True  # a tool named `search` does not shadow the helper
    assert value["ambiguous"] == "Ambiguous tool name: dup; use an exact tool id."
    assert value["byId"] == "from b"
    assert value["proto"] is None and value["frozen"] is True


@pytest.mark.anyio
async def test_tools_call_resolves_to_tool_text_and_details(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value("return await tools.call('lookup', { word: 'ferry' })")
    assert value == {
        "tool": "nodmix:core:lookup",
        "text": "looked up",
        "details": {"tool": "lookup", "args": {"word": "ferry"}},
    }


@pytest.mark.anyio
async def test_catalog_helpers_and_globals_cannot_be_replaced_by_guest_code(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const attempts = [];
        const tryIt = (label, fn) => { try { fn(); attempts.push(label + ':ok'); }
                                        catch (e) { attempts.push(label + ':' + e.name); } };
        tryIt('assign', () => { 'use strict'; tools.search = () => 'hijacked'; });
        tryIt('global', () => { 'use strict'; globalThis.tools = {}; });
        tryIt('delete', () => { 'use strict'; delete globalThis.ALL_TOOLS; });
        tryIt('text', () => { 'use strict'; globalThis.text = () => null; });
        const stillWorks = (await tools.search('glossary'))[0].id;
        return { attempts, stillWorks };
        """
    )
    assert value["attempts"] == [
        "assign:TypeError",
        "global:TypeError",
        "delete:TypeError",
        "text:TypeError",
    ]
    assert value["stillWorks"] == "nodmix:core:lookup"


@pytest.mark.anyio
async def test_replacing_intrinsics_does_not_change_how_the_bridge_behaves(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        JSON.parse = () => ({ forged: true });
        JSON.stringify = () => '{"forged":true}';
        String = () => 'forged';
        const r = await tools.call('lookup', { word: 'real' });
        return r.details.args.word;
        """
    )
    assert value == "real"


@pytest.mark.anyio
async def test_text_and_json_output_keeps_call_order_and_json_safety(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    (result,) = await h.run_to_end(
        """
        text('first');
        json({ a: 1, nested: [1, 2] });
        text({ b: 2 });
        const loop = {}; loop.self = loop;
        json(loop);
        text(10n);
        json(undefined);
        return 'done';
        """
    )
    assert result["status"] == "completed" and result["value"] == "done"
    assert result["output"] == [
        {"type": "text", "text": "first"},
        {"type": "json", "value": {"a": 1, "nested": [1, 2]}},
        {"type": "text", "text": '{"b":2}'},
        {"type": "json", "value": "[object Object]"},
        {"type": "text", "text": '"10"'},
        {"type": "json", "value": None},
    ]


@pytest.mark.anyio
async def test_return_values_are_made_json_safe(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        return { big: 10n, fn() {}, undef: undefined, date: new Date(0), nan: NaN,
                 err: new RangeError('r'), list: [undefined, () => 1] };
        """
    )
    assert value == {
        "big": "10",
        "date": "1970-01-01T00:00:00.000Z",
        "nan": None,
        "err": {"name": "RangeError", "message": "r"},
        "list": [None, None],
    }
    circular = await h.value("const c = {}; c.c = c; return c")
    assert isinstance(circular, str) and "circular" in circular
    assert await h.value("await tools.lookup({})") is None  # no return completes as null
    assert await h.value("return undefined") is None


@pytest.mark.anyio
async def test_tool_inputs_cross_the_bridge_as_json_only(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    seen: list[dict[str, Any]] = []

    async def record(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        seen.append(args)
        return ToolResult.text("ok")

    h = await build_harness(engine, sessions, workspace, extra_tools=[make_tool("record", record)])
    value = await h.value(
        """
        await tools.record({ when: new Date(0), fn: () => 1, big: 1n === 1n,
                             nested: { u: undefined } });
        let notObject;
        try { await tools.record('just a string'); } catch (e) { notObject = e.message; }
        await tools.record();
        let tooBig;
        try { await tools.record({ blob: 'x'.repeat(2 * 1024 * 1024) }); }
        catch (e) { tooBig = e.message; }
        return [notObject, tooBig];
        """
    )
    assert seen == [{"when": "1970-01-01T00:00:00.000Z", "big": True, "nested": {}}, {}]
    assert value == [
        "record takes one object argument, got str",
        "input for record is larger than 1048576 bytes",
    ]


@pytest.mark.anyio
async def test_yield_control_suspends_and_wait_resumes_with_the_reason(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    first = await h.exec(
        "text('before'); const r = await yield_control('checkpoint'); text('after'); return r"
    )
    assert first["status"] == "waiting" and first["reason"] == "yield"
    assert first["output"] == [{"type": "text", "text": "before"}]
    assert "pendingToolCalls" not in first
    final = await h.wait(first["runId"])
    assert final["status"] == "completed"
    assert final["value"] == {"status": "yielded", "reason": "checkpoint"}
    assert final["output"] == [
        {"type": "text", "text": "before"},
        {"type": "text", "text": "after"},
    ]


@pytest.mark.anyio
async def test_command_is_an_alias_of_code_and_must_match_when_both_are_given(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    assert (await h.exec_args({"command": "return 2"}))["value"] == 2
    assert (await h.exec_args({"code": "return 3", "command": "return 3"}))["value"] == 3
    mismatch = await h.exec_args({"code": "return 3", "command": "return 4"})
    assert mismatch["status"] == "failed" and mismatch["code"] == "invalid_input"
    assert "must match" in mismatch["error"]
    assert (await h.exec_args({"code": "return 1"}))["value"] == 1  # javascript by default


@pytest.mark.anyio
async def test_guest_has_no_node_host_or_bridge_globals(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    names = [
        "require",
        "process",
        "fetch",
        "WebAssembly",
        "std",
        "os",
        "Deno",
        "Bun",
        "XMLHttpRequest",
        "module",
        "exports",
        "__nodmixHostRequest",
        "__nodmixCatalog",
        "cap",
        "call",
        "request",
    ]
    value = await h.value(f"return {names!r}.map(n => typeof globalThis[n])")
    assert value == ["undefined"] * len(names)
    hidden = await h.value(
        "return Object.getOwnPropertyNames(globalThis).filter(n => n.startsWith('__'))"
    )
    assert hidden == []
    internals = await h.value(
        """
        const out = [];
        for (const get of [() => tools.search.caller, () => tools.search.arguments,
                           () => text.caller, () => Notes]) {
          try { out.push(typeof get()); } catch (e) { out.push(e.name); }
        }
        return out;
        """
    )
    assert internals == ["TypeError", "TypeError", "TypeError", "ReferenceError"]


@pytest.mark.anyio
async def test_host_errors_arrive_as_plain_guest_errors(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        try { await tools.describe('no_such_tool'); } catch (e) {
          return { plain: Object.getPrototypeOf(e) === Error.prototype, name: e.name,
                   message: e.message, own: Object.getOwnPropertyNames(e).sort(),
                   hostStack: String(e.stack).includes('.py') };
        }
        """
    )
    assert value["plain"] is True and value["name"] == "Error"
    assert value["message"].startswith("Unknown tool id: no_such_tool.")
    assert "tools.search" in value["message"]
    assert value["hostStack"] is False


@pytest.mark.anyio
async def test_without_mcp_tools_there_is_no_mcp_global_and_no_api_files(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        "return { mcp: typeof MCP, files: (await API.list()).files, ns: Object.keys(namespaces) }"
    )
    assert value == {"mcp": "undefined", "files": [], "ns": []}
    assert "MCP" not in h.exec_tool.spec.description
