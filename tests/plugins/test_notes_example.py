"""The bundled notes plugin works as a real plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.config.schema import PluginEntry, PluginsConfig
from nodmix.hooks import ToolCallInfo
from nodmix.plugins import PluginRegistry, load_plugins
from nodmix.tools import Tool, ToolContext


def _enabled(config: dict[str, object] | None = None) -> PluginRegistry:
    registry = PluginRegistry()
    entry = PluginEntry(enabled=True, config=config or {})
    load_plugins(PluginsConfig(entries={"notes": entry}), registry)
    return registry


def _ctx(workspace: Path) -> ToolContext:
    return ToolContext(
        agent_id="main",
        session_key="agent:main:main",
        session_id="s",
        run_id="r",
        call_id="c",
        workspace=workspace,
    )


def _tools(registry: PluginRegistry) -> dict[str, Tool]:
    return {t.spec.name: t for t in registry.plugin_tools()}


@pytest.mark.anyio
async def test_notes_are_added_listed_searched_and_read(tmp_path: Path) -> None:
    tools = _tools(_enabled())
    ctx = _ctx(tmp_path)
    added = await tools["note_add"].call({"title": "Trip plan", "text": "Book the ferry"}, ctx)
    assert not added.is_error
    listed = await tools["note_list"].call({}, ctx)
    assert listed.details == {"notes": [{"id": "trip-plan", "title": "Trip plan"}]}
    found = await tools["note_search"].call({"query": "ferry"}, ctx)
    assert "trip-plan" in found.text_content
    missing = await tools["note_search"].call({"query": "train"}, ctx)
    assert missing.details == {"notes": []}
    read = await tools["note_read"].call({"id": "trip-plan"}, ctx)
    assert "Book the ferry" in read.text_content
    assert (tmp_path / "notes" / "trip-plan.md").is_file()


def _info(tool_id: str, path: str) -> ToolCallInfo:
    return ToolCallInfo(
        tool_name=tool_id.rsplit(":", 1)[1],
        tool_id=tool_id,
        params={"path": path},
        agent_id="main",
        session_key="k",
        session_id="s",
        run_id="r",
        call_id="c",
    )


@pytest.mark.anyio
async def test_protect_hook_blocks_file_tools_writing_into_notes() -> None:
    registry = _enabled()
    (hook,) = registry.hooks.before_tool_call
    blocked = await hook.hook(_info("nodmix:core:write", "notes/x.md"))
    assert blocked is not None and blocked.block
    assert await hook.hook(_info("nodmix:core:write", "other/x.md")) is None
    assert await hook.hook(_info("nodmix:core:read", "notes/x.md")) is None


def test_protect_hook_can_be_turned_off_in_plugin_config() -> None:
    assert _enabled({"protect": False}).hooks.before_tool_call == []
