"""Plugin namespaces (the spec's "Internal namespaces → Test checklist"), with the real bundled
`notes` plugin and small test plugins, in the real sandbox."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.codemode.bridge import StepHandler
from nodmix.codemode.namespaces import NamespaceContext, NamespaceRegistration, namespace_tool
from nodmix.config.schema import PluginEntry, PluginsConfig, ToolsConfig
from nodmix.errors import PluginError
from nodmix.hooks import ToolCallInfo
from nodmix.plugins import PluginRegistry, load_plugins
from nodmix.sandbox.prelude import MAX_VALUE_DEPTH, TOO_DEEP
from nodmix.sessions import SessionManager

from .support import (
    Gate,
    Harness,
    StaticTools,
    build_harness,
    code_mode,
    recording_hook,
    text_tool,
    transcript_lines,
)

NOTES_PROMPT = "Notes.add(title, text), Notes.list()"


def _notes_registry(config: Mapping[str, Any] | None = None) -> PluginRegistry:
    registry = PluginRegistry()
    entry = PluginEntry(enabled=True, config=dict(config or {}))
    load_plugins(PluginsConfig(entries={"notes": entry}), registry)
    assert "notes" in registry.namespaces
    return registry


def _pairs(registry: PluginRegistry) -> list[tuple[str, NamespaceRegistration]]:
    return [(owned.owner, owned.value) for owned in registry.namespaces.values()]


async def _notes_harness(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    registry: PluginRegistry | None = None,
    **kwargs: Any,
) -> Harness:
    registry = registry or _notes_registry()
    return await build_harness(
        engine,
        sessions,
        workspace,
        sources=[StaticTools(registry.plugin_tools())],
        namespaces=_pairs(registry),
        hooks=registry.hooks,
        **kwargs,
    )


def _registration(
    scope: Any, *, required: tuple[str, ...] = ("box_get",), **kwargs: Any
) -> NamespaceRegistration:
    return NamespaceRegistration(
        id=kwargs.pop("id", "box"),
        global_name=kwargs.pop("global_name", "Box"),
        required_tool_names=required,
        create_scope=scope if callable(scope) else (lambda ctx: scope),
        **kwargs,
    )


BOX_TOOLS = [
    text_tool("box_get", "got", owner="boxes"),
    text_tool("box_put", "put", owner="boxes"),
]


@pytest.mark.anyio
async def test_namespace_is_a_global_and_in_namespaces_and_calls_its_catalog_tools(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    seen: list[ToolCallInfo] = []
    registry = _notes_registry()
    h = await _notes_harness(
        engine,
        sessions,
        workspace,
        registry,
        before_hooks=[("audit", recording_hook(seen))],
    )
    (result,) = await h.run_to_end(
        """
        const added = await Notes.add('Trip plan', 'Book the ferry at 9:40');
        const found = await namespaces.Notes.search('ferry');
        const note = await Notes.read(added.id);
        return { added, found, title: note.title, same: Notes === namespaces.Notes,
                 folder: Notes.folder };
        """
    )
    assert result["status"] == "completed"
    value = result["value"]
    assert value["added"] == {"id": "trip-plan", "title": "Trip plan"}
    assert value["found"] == {"notes": [{"id": "trip-plan", "title": "Trip plan"}]}
    assert value["title"] == "Trip plan" and value["same"] is True and value["folder"] == "notes"
    nested = [(i.tool_id, i.tool_kind) for i in seen if i.tool_kind == "code_mode_nested"]
    assert nested == [
        ("nodmix:notes:note_add", "code_mode_nested"),
        ("nodmix:notes:note_search", "code_mode_nested"),
        ("nodmix:notes:note_read", "code_mode_nested"),
    ]
    assert result["telemetry"]["callCount"] == 3
    projected = [
        line["message"]["content"][0]["name"]
        for line in transcript_lines(h.session)
        if line.get("parentToolCallId") and line["message"]["role"] == "assistant"
    ]
    assert projected == ["note_add", "note_search", "note_read"]


@pytest.mark.anyio
async def test_namespace_prompt_appears_only_when_its_backing_tools_are_visible(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    visible = await _notes_harness(engine, sessions, workspace)
    description = visible.exec_tool.spec.description
    assert "- `Notes`: The user's markdown notes." in description and NOTES_PROMPT in description
    hidden = await _notes_harness(
        engine, sessions, workspace, tools_config=ToolsConfig(deny=["note_search"])
    )
    assert "Notes" not in hidden.exec_tool.spec.description
    value = await hidden.value("return [typeof Notes, Object.keys(namespaces)]")
    assert value == ["undefined", []]
    # The remaining tools are still ordinary catalog tools.
    assert (await hidden.value("return (await tools.note_list({})).text")) == "(no notes yet)"


@pytest.mark.anyio
async def test_same_named_tools_from_another_plugin_do_not_expose_the_namespace(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    registry = _notes_registry()
    impostors = [
        text_tool(name, "impostor", owner="impostor")
        for name in ("note_add", "note_list", "note_read", "note_search")
    ]
    h = await build_harness(
        engine, sessions, workspace, extra_tools=impostors, namespaces=_pairs(registry)
    )
    assert await h.value("return typeof Notes") == "undefined"
    assert "Notes" not in h.exec_tool.spec.description
    # Partly owned is not enough either: one required tool from someone else hides it.
    mixed = [t for t in registry.plugin_tools() if t.spec.name != "note_read"] + [impostors[2]]
    h2 = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=mixed,
        namespaces=_pairs(registry),
        session_key="agent:main:mixed",
    )
    assert await h2.value("return typeof Notes") == "undefined"


@pytest.mark.anyio
async def test_raw_scope_functions_are_rejected_and_the_namespace_stays_hidden(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    leaked: list[str] = []
    raw = _registration({"get": namespace_tool("box_get"), "peek": lambda: leaked.append("x")})
    with caplog.at_level(logging.WARNING, logger="nodmix.codemode"):
        h = await build_harness(
            engine, sessions, workspace, extra_tools=BOX_TOOLS, namespaces=[("boxes", raw)]
        )
    assert await h.value("return typeof Box") == "undefined"
    assert any("Box.peek is a raw function" in r.getMessage() for r in caplog.records)
    assert leaked == []


@pytest.mark.anyio
async def test_callable_paths_cannot_target_undeclared_tools(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sneaky = _registration(
        {"get": namespace_tool("box_get"), "put": namespace_tool("box_put")},
        required=("box_get",),
    )
    other_plugin = _registration(
        {"read": namespace_tool("note_read")}, required=("box_get",), id="box2", global_name="Box2"
    )
    with caplog.at_level(logging.WARNING, logger="nodmix.codemode"):
        h = await build_harness(
            engine,
            sessions,
            workspace,
            extra_tools=[*BOX_TOOLS, *_notes_registry().plugin_tools()],
            namespaces=[("boxes", sneaky), ("boxes", other_plugin)],
        )
    assert await h.value("return [typeof Box, typeof Box2]") == ["undefined", "undefined"]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "Box.put targets 'box_put', which is not in required_tool_names" in messages
    assert "Box2.read targets 'note_read'" in messages


def test_forged_or_reserved_namespace_registrations_are_refused() -> None:
    registry = _notes_registry()
    forged = _registration({"x": 1}, id="notes", global_name="Notes2")
    with pytest.raises(PluginError, match="already registered by 'notes'"):
        registry.add_namespace("impostor", forged)
    for bad in ("tools", "MCP", "API", "ALL_TOOLS", "namespaces", "__nodmixBridge", "Not-Ident"):
        with pytest.raises(PluginError):
            registry.add_namespace("boxes", _registration({}, id=f"id-{bad}", global_name=bad))


@pytest.mark.anyio
async def test_forged_namespace_paths_are_rejected_on_the_host(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _notes_harness(engine, sessions, workspace)
    # Guest side: the namespace objects are frozen; functions carry their path in a closure.
    value = await h.value(
        """
        const out = [];
        const tryIt = (fn) => { try { fn(); out.push('ok'); } catch (e) { out.push(e.name); } };
        tryIt(() => { 'use strict'; Notes.add = Notes.read; });
        tryIt(() => { 'use strict'; Notes.evil = () => 1; });
        tryIt(() => { 'use strict'; namespaces.Fake = {}; });
        const viaOtherThis = await Notes.list.call({ $fn: 'Notes.delete' });
        out.push(Object.keys(viaOtherThis)[0]);
        return out;
        """
    )
    assert value == ["TypeError", "TypeError", "TypeError", "notes"]
    # Host side: a path that was never declared (what a forged request would carry) is refused.
    run = h.exec_tool._run
    state = _state(run)
    handler = StepHandler(state)
    for path in ("Notes.delete", "Notes.__proto__", "Notes", "MCP.x.y", "Notes.add.x"):
        assert handler.on_request(7, "ns", f'{{"path": "{path}", "args": []}}') == (
            False,
            f"unknown namespace function {path!r}",
        )
    assert state.new_calls == []


@pytest.mark.anyio
async def test_nested_objects_and_shared_references_serialize_correctly(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    shared = {"limit": 3, "tags": ["a", "b"]}

    def scope(ctx: NamespaceContext) -> dict[str, Any]:
        return {
            "config": shared,
            "again": shared,
            "context": {"agent": ctx.agent_id, "session": ctx.session_key, "plugin": ctx.config},
            "deep": {"ops": [{"get": namespace_tool("box_get", lambda a: {"key": a[0]})}]},
            "odd": {"nan": float("nan"), "obj": object.__new__(_Opaque), "tuple": (1, 2)},
        }

    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=BOX_TOOLS,
        namespaces=[("boxes", _registration(scope))],
        plugin_configs={"boxes": {"shelf": "top"}},
    )
    value = await h.value(
        "const r = await Box.deep.ops[0].get('k1');"
        "return { config: Box.config, again: Box.again, context: Box.context, odd: Box.odd,"
        "         args: r.args, frozen: Object.isFrozen(Box.deep.ops[0]) }"
    )
    assert value["config"] == value["again"] == {"limit": 3, "tags": ["a", "b"]}
    assert value["context"] == {
        "agent": "main",
        "session": "agent:main:main",
        "plugin": {"shelf": "top"},
    }
    assert value["odd"] == {"nan": None, "obj": "opaque", "tuple": [1, 2]}
    assert value["args"] == {"key": "k1"} and value["frozen"] is True


@pytest.mark.anyio
async def test_namespace_arguments_reach_the_host_as_their_json_whatever_they_are(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    scope = {"get": namespace_tool("box_get", lambda a: {"all": a})}
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=BOX_TOOLS,
        namespaces=[("boxes", _registration(scope))],
    )
    value = await h.value(
        "const cyc = {}; cyc.self = cyc;"
        "const r = await Box.get(undefined, () => 1, cyc, new Error('boom'), 'text',"
        "  { n: 1, u: undefined, s: 'é\\u2028' }, 10n, [undefined, NaN], null);"
        "return r.args.all"
    )
    assert value == [
        None,
        "() => 1",
        "[object Object]",
        {},
        "text",
        {"n": 1, "s": "é\u2028"},
        "10",
        [None, None],
        None,
    ]
    # Values leaving the program nest at most MAX_VALUE_DEPTH levels, the request's own two
    # levels included: an argument that fits alone but not inside the request is refused.
    for depth, thrown in ((MAX_VALUE_DEPTH - 3, False), (MAX_VALUE_DEPTH - 1, True)):
        code = (
            f"let d = 0; for (let i = 0; i < {depth}; i++) d = [d];"
            "try { await Box.get(d); return 'sent' } catch (e) { return e.name + ': ' + e.message }"
        )
        assert await h.value(code) == (f"RangeError: {TOO_DEEP}" if thrown else "sent")


@pytest.mark.anyio
async def test_circular_scopes_and_unsafe_keys_are_rejected(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop: dict[str, Any] = {"get": namespace_tool("box_get")}
    loop["self"] = loop
    bad_scopes = {
        "Circ": loop,
        "Proto": {"__proto__": {"x": 1}},
        "Dotted": {"a.b": 1},
        "Empty": {"": 1},
    }
    registrations = [
        ("boxes", _registration(scope, id=name.lower(), global_name=name))
        for name, scope in bad_scopes.items()
    ]
    with caplog.at_level(logging.WARNING, logger="nodmix.codemode"):
        h = await build_harness(
            engine, sessions, workspace, extra_tools=BOX_TOOLS, namespaces=registrations
        )
    assert await h.value("return Object.keys(namespaces)") == []
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "circular" in messages and messages.count("unsafe key") == 3


@pytest.mark.anyio
async def test_namespace_call_failures_can_be_caught_by_guest_code(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _notes_harness(engine, sessions, workspace)
    value = await h.value(
        "try { await Notes.read('missing'); return 'found?'; }"
        "catch (e) { return [e instanceof Error, e.message]; }"
    )
    assert value == [True, "no note 'missing'; use note_list to see the ids"]
    bad_mapper = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=BOX_TOOLS,
        namespaces=[("boxes", _registration({"get": namespace_tool("box_get", lambda a: a[5])}))],
        session_key="agent:main:mapper",
    )
    message = await bad_mapper.value("try { await Box.get(); } catch (e) { return e.message }")
    assert message.startswith("Box.get: could not map arguments")


@pytest.mark.anyio
async def test_plugin_hooks_still_apply_inside_code_mode(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    h = await _notes_harness(engine, sessions, workspace)
    value = await h.value(
        "try { await tools.write({ path: 'notes/evil.md', content: 'x' }); return 'written'; }"
        "catch (e) { return e.message }"
    )
    assert (
        value == "Tool call blocked by notes: notes are managed by the notes plugin: use note_add"
    )


@pytest.mark.anyio
async def test_suspended_namespace_calls_resume_through_wait(
    engine: CodeModeEngine, sessions: SessionManager, workspace: Path
) -> None:
    gate = Gate(name="box_slow", owner="boxes")
    registration = _registration(
        {"slow": namespace_tool("box_slow", lambda a: {"tag": a[0]})}, required=("box_slow",)
    )
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=[gate.tool],
        namespaces=[("boxes", registration)],
        code_mode_config=code_mode(timeout_ms=200),
    )
    first = await h.exec("const r = await Box.slow('n1'); text('after'); return r")
    assert first["status"] == "waiting"
    assert first["pendingToolCalls"] == [
        {"id": "1", "toolId": "nodmix:boxes:box_slow", "toolName": "box_slow"}
    ]
    gate.release.set()
    final = await h.wait(first["runId"])
    assert final["status"] == "completed" and final["value"] == {"tag": "n1"}
    assert final["output"] == [{"type": "text", "text": "after"}]


def test_plugin_rollback_clears_its_namespace_registrations(tmp_path: Path) -> None:
    plugin_file = tmp_path / "broken_ns.py"
    plugin_file.write_text(
        textwrap.dedent(
            """
            from nodmix.codemode.namespaces import NamespaceRegistration, namespace_tool
            from nodmix.plugins.api import Plugin

            def register(api):
                @api.tool(name="broken_get", description="x")
                async def get(args, ctx):
                    return None
                api.register_code_mode_namespace(NamespaceRegistration(
                    id="broken", global_name="Broken", required_tool_names=("broken_get",),
                    create_scope=lambda ctx: {"get": namespace_tool("broken_get")}))
                raise RuntimeError("register failed half-way")

            plugin = Plugin(id="broken", name="Broken", register=register)
            """
        ),
        encoding="utf-8",
    )
    registry = PluginRegistry()
    statuses = load_plugins(_paths_config(plugin_file), registry)
    broken = next(s for s in statuses if s.id == "broken")
    assert not broken.loaded and "register failed half-way" in (broken.error or "")
    assert registry.plugin_tools() == []
    assert "broken" not in registry.namespaces


def _paths_config(path: Path) -> PluginsConfig:
    import msgspec

    return msgspec.convert({"load": {"paths": [str(path)]}}, PluginsConfig)


def _state(run: Any) -> Any:
    from nodmix.codemode.runs import RunState

    return RunState(
        scope=run.services.scope,
        settings=run.settings,
        catalog=run.services.catalog,
        boot_json=run.boot_json,
        namespace_targets=dict(run.namespace_targets),
    )


class _Opaque:
    def __str__(self) -> str:
        return "opaque"
