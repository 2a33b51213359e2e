"""The run-scoped hidden catalog seen through the real bridge: ids, policy filtering, control
tools, search/describe/call, the shell `exec` by id, and telemetry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.config.schema import AgentToolsConfig, ToolsConfig
from nodmix.sessions import SessionManager

from .support import Harness, StaticTools, build_harness, code_mode, text_tool

PLUGIN_TOOLS = [
    text_tool("note_add", "added", owner="notes", description="Save a note."),
    text_tool("note_list", "listed", owner="notes", description="List notes."),
]
CLIENT_TOOLS = [text_tool("select_file", "chosen.txt", owner="app", source="client")]
CONTROL_TOOLS = [
    text_tool(name, "control", owner="toolsearch")
    for name in ("tool_search_code", "tool_search", "tool_describe", "tool_call")
]


async def _harness(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path, **kwargs: Any
) -> Harness:
    return await build_harness(
        engine,
        sessions,
        workspace,
        sources=[StaticTools(PLUGIN_TOOLS), StaticTools(CLIENT_TOOLS)],
        **kwargs,
    )


@pytest.mark.anyio
async def test_catalog_ids_follow_source_owner_name_and_are_ordered_deterministically(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    ids = await h.value("return ALL_TOOLS.map(t => t.id)")
    assert set(ids) == {
        "nodmix:core:exec",
        "nodmix:core:read",
        "nodmix:core:write",
        "nodmix:core:edit",
        "nodmix:core:web_fetch",
        "nodmix:notes:note_add",
        "nodmix:notes:note_list",
        "client:app:select_file",
    }
    # Same tools in another order: same catalog order (ids sort in a fixed collation).
    again = await build_harness(
        engine,
        sessions,
        workspace,
        sources=[StaticTools(list(reversed(CLIENT_TOOLS + PLUGIN_TOOLS)))],
        session_key="agent:main:other",
    )
    assert await again.value("return ALL_TOOLS.map(t => t.id)") == ids
    sources = await h.value("return ALL_TOOLS.map(t => [t.source, t.sourceName])")
    assert ["nodmix", "notes"] in sources and ["client", "app"] in sources


@pytest.mark.anyio
async def test_every_effective_tool_is_in_all_tools_and_denied_ones_are_not(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine,
        sessions,
        workspace,
        tools_config=ToolsConfig(deny=["write", "nodmix:notes:note_list"]),
        agent_tools=AgentToolsConfig(deny=["group:client"]),
    )
    ids = await h.value("return ALL_TOOLS.map(t => t.id)")
    assert "nodmix:core:read" in ids and "nodmix:notes:note_add" in ids
    for denied in ("nodmix:core:write", "nodmix:notes:note_list", "client:app:select_file"):
        assert denied not in ids
    telemetry = (await h.exec("return 1"))["telemetry"]
    assert telemetry["catalogSize"] == len(ids)
    assert telemetry["sources"] == {"nodmix": len(ids), "mcp": 0, "client": 0}


@pytest.mark.anyio
async def test_allow_list_limits_the_catalog_to_the_allowed_tools(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine, sessions, workspace, tools_config=ToolsConfig(allow=["read", "group:client"])
    )
    assert h.visible_names == ["exec", "wait"]
    assert await h.value("return ALL_TOOLS.map(t => t.id)") == [
        "nodmix:core:read",
        "client:app:select_file",
    ]


@pytest.mark.anyio
async def test_denied_tools_cannot_be_called_by_a_guessed_id_or_name(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine,
        sessions,
        workspace,
        tools_config=ToolsConfig(deny=["write", "notes", "client:app:select_file"]),
    )
    guesses = [
        "nodmix:core:write",
        "write",
        "nodmix:notes:note_add",
        "note_add",
        "client:app:select_file",
        "select_file",
    ]
    value = await h.value(
        f"""
        const out = {{}};
        for (const id of {guesses!r}) {{
          try {{ await tools.call(id, {{ path: 'x.txt', content: 'pwned' }}); out[id] = 'CALLED'; }}
          catch (e) {{ out[id] = e.message; }}
        }}
        out.shortcut = typeof tools.write;
        return out;
        """
    )
    assert value.pop("shortcut") == "undefined"
    for guess, message in value.items():
        assert message.startswith(f"Unknown tool id: {guess}."), (guess, message)
    assert not (h.agent.workspace / "x.txt").exists()
    assert h.started() == []  # nothing was dispatched


@pytest.mark.anyio
async def test_tool_search_control_tools_are_hidden_from_model_and_catalog(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace, extra_tools=CONTROL_TOOLS)
    assert h.visible_names == ["exec", "wait"]
    value = await h.value(
        """
        const names = ALL_TOOLS.map(t => t.name);
        const errors = [];
        for (const n of ['tool_search', 'tool_search_code', 'tool_describe', 'tool_call']) {
          try { await tools.call(n, {}); } catch (e) { errors.push(e.message.split('.')[0]); }
        }
        return { names, errors, shortcuts: typeof tools.tool_search };
        """
    )
    assert not any(n.startswith("tool_") for n in value["names"])
    assert value["errors"] == [
        "Unknown tool id: tool_search",
        "Unknown tool id: tool_search_code",
        "Unknown tool id: tool_describe",
        "Unknown tool id: tool_call",
    ]
    assert value["shortcuts"] == "undefined"


@pytest.mark.anyio
async def test_recursive_code_mode_exec_and_wait_are_not_callable_from_guest_code(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(
        engine, sessions, workspace, tools_config=ToolsConfig(deny=["nodmix:core:exec"])
    )
    value = await h.value(
        """
        const out = {};
        for (const ref of ['exec', 'wait', 'nodmix:codemode:exec', 'nodmix:codemode:wait']) {
          try { await tools.call(ref, { code: 'return 1' }); out[ref] = 'CALLED'; }
          catch (e) { out[ref] = e.message.split('.')[0]; }
        }
        out.exec = [out.exec, typeof tools.exec];
        out.catalog = ALL_TOOLS.filter(t => ['exec', 'wait'].includes(t.name)).length;
        return out;
        """
    )
    assert value == {
        "exec": ["Unknown tool id: exec", "undefined"],
        "wait": "Unknown tool id: wait",
        "nodmix:codemode:exec": "Unknown tool id: nodmix:codemode:exec",
        "nodmix:codemode:wait": "Unknown tool id: nodmix:codemode:wait",
        "catalog": 0,
    }


@pytest.mark.anyio
async def test_shell_exec_is_hidden_from_the_model_but_callable_by_catalog_id(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await build_harness(engine, sessions, workspace)
    assert h.visible_names == ["exec", "wait"]
    value = await h.value(
        """
        const byId = await tools.call('nodmix:core:exec', { command: 'echo from-shell' });
        const shortcut = await tools.exec({ command: 'cat notes.txt' });
        const entry = await tools.describe('nodmix:core:exec');
        return { byId: byId.text, shortcut: shortcut.text, required: entry.parameters.required };
        """
    )
    assert value["byId"].startswith("from-shell")
    assert "9:40" in value["shortcut"]
    assert value["required"] == ["command"]


@pytest.mark.anyio
async def test_search_describe_call_reads_a_workspace_file(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const hits = await tools.search('read file');
        const entry = await tools.describe(hits[0].id);
        const result = await tools.call(entry.id, { path: 'notes.txt' });
        return { hits: hits.map(h => h.id), compact: !('parameters' in hits[0]),
                 schema: entry.parameters, text: result.text };
        """
    )
    assert value["hits"][0] == "nodmix:core:read"
    assert value["compact"] is True
    assert value["schema"]["properties"]["path"]["type"] == "string"
    assert "9:40" in value["text"]


@pytest.mark.anyio
async def test_search_limits_follow_the_settings_and_reject_bad_values(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(
        engine,
        sessions,
        workspace,
        code_mode_config=code_mode(search_default_limit=2, max_search_limit=3),
    )
    value = await h.value(
        """
        const sizes = {
          dflt: (await tools.search('')).length,
          one: (await tools.search('', { limit: 1 })).length,
          capped: (await tools.search('', { limit: 500 })).length,
        };
        const bad = [];
        for (const limit of [0, -1, 2.5, 'two', true]) {
          try { await tools.search('x', { limit }); bad.push('ok'); }
          catch (e) { bad.push(e.message); }
        }
        return { sizes, bad, none: await tools.search('zzzz-nothing-matches') };
        """
    )
    assert value["sizes"] == {"dflt": 2, "one": 1, "capped": 3}
    assert value["bad"] == ["limit must be a positive integer."] * 5
    assert value["none"] == []


@pytest.mark.anyio
async def test_describe_accepts_ids_and_unique_names_and_explains_unknown_ones(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    value = await h.value(
        """
        const byName = await tools.describe('  select_file ');
        let unknown;
        try { await tools.describe('nodmix:core:nope'); } catch (e) { unknown = e.message; }
        return { id: byName.id, source: byName.source, hasSchema: 'parameters' in byName, unknown };
        """
    )
    assert value["id"] == "client:app:select_file" and value["source"] == "client"
    assert value["hasSchema"] is True
    assert value["unknown"] == (
        "Unknown tool id: nodmix:core:nope. Use tools.search(query) or ALL_TOOLS to find valid ids."
    )


@pytest.mark.anyio
async def test_telemetry_counts_search_describe_and_calls_across_exec_steps(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _harness(engine, sessions, workspace)
    first = await h.exec(
        "await tools.search('note'); await tools.describe('note_add'); "
        "await tools.call('note_add', {}); await tools.note_list({}); return 1"
    )
    telemetry = dict(first["telemetry"])
    assert set(telemetry.pop("tokensAvoided")) >= {"schemaTokens", "resultTokens", "total"}
    assert telemetry == {
        "catalogSize": 8,
        "sources": {"nodmix": 7, "mcp": 0, "client": 1},
        "searchCount": 1,
        "describeCount": 1,
        "callCount": 2,
        "visibleTools": ["exec", "wait"],
    }
    second = await h.exec("await tools.search('file'); return 2")
    assert second["telemetry"]["searchCount"] == 2  # cumulative for the run's catalog
    assert second["telemetry"]["callCount"] == 2


@pytest.mark.anyio
async def test_catalogs_are_scoped_to_their_run(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    with_client = await _harness(engine, sessions, workspace)
    other_agent = await build_harness(
        engine, sessions, workspace, agent_id="helper", session_key="agent:helper:main"
    )
    assert "client:app:select_file" in await with_client.value("return ALL_TOOLS.map(t => t.id)")
    other_ids = await other_agent.value("return ALL_TOOLS.map(t => t.id)")
    assert "client:app:select_file" not in other_ids
    assert "nodmix:notes:note_add" not in other_ids
    value = await other_agent.value(
        "try { await tools.call('client:app:select_file', {}); } catch (e) { return e.message }"
    )
    assert value.startswith("Unknown tool id")
