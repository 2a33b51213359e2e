"""Plugin discovery, enabling, and rollback."""

from __future__ import annotations

from pathlib import Path

from nodmix.config.schema import PluginEntry, PluginLoadConfig, PluginsConfig
from nodmix.plugins import PluginRegistry, load_plugins
from nodmix.tools.base import quick_form

GOOD_PLUGIN = """
from nodmix.plugins import Plugin
from nodmix.tools import ToolResult

async def hello(args, ctx):
    return ToolResult.text("hello " + str(args.get("name", "you")))

def register(api):
    api.tool(name="hello", description="Say hello.")(hello)
    async def hook(info):
        return None
    api.on_after_tool_call(hook)

plugin = Plugin(id="greeter", name="Greeter", register=register)
"""

FAILING_PLUGIN = """
from nodmix.plugins import Plugin
from nodmix.tools import ToolResult

async def t(args, ctx):
    return ToolResult.text("x")

def register(api):
    api.tool(name="half_done", description="Registered before the failure.")(t)
    raise RuntimeError("boom")

plugin = Plugin(id="broken", name="Broken", register=register)
"""


def _config(*paths: Path, entries: dict[str, PluginEntry] | None = None) -> PluginsConfig:
    return PluginsConfig(
        entries=entries or {}, load=PluginLoadConfig(paths=[str(p) for p in paths])
    )


def test_path_plugin_registers_tools_owned_by_its_id(tmp_path: Path) -> None:
    (tmp_path / "greeter.py").write_text(GOOD_PLUGIN, encoding="utf-8")
    registry = PluginRegistry()
    statuses = {s.id: s for s in load_plugins(_config(tmp_path / "greeter.py"), registry)}
    assert statuses["greeter"].loaded
    (tool,) = registry.plugin_tools()
    assert tool.origin.id == "nodmix:greeter:hello"
    assert len(registry.hooks.after_tool_call) == 1


QUICK_PLUGIN = """
from nodmix.plugins import Plugin
from nodmix.tools import FunctionTool, ToolResult

def count(args, ctx):
    return ToolResult.text(str(len(str(args.get("text", "")))))

def register(api):
    api.register_tool(FunctionTool.create_quick(count, name="count", description="Count."))
    async def audit(info):
        return None
    api.on_before_tool_call(audit, tools="write")
    api.on_after_tool_call(audit, tools=["write", "edit"])

plugin = Plugin(id="counter", name="Counter", register=register)
"""


def test_a_plugin_offers_a_quick_tool_and_hooks_that_name_their_tools(tmp_path: Path) -> None:
    (tmp_path / "counter.py").write_text(QUICK_PLUGIN, encoding="utf-8")
    registry = PluginRegistry()
    statuses = {s.id: s for s in load_plugins(_config(tmp_path / "counter.py"), registry)}
    assert statuses["counter"].loaded, statuses["counter"].error
    (tool,) = registry.plugin_tools()
    assert tool.origin.id == "nodmix:counter:count" and quick_form(tool) is not None
    (before,) = registry.hooks.before_tool_call
    (after,) = registry.hooks.after_tool_call
    assert before.tools == frozenset({"write"}) and after.tools == frozenset({"write", "edit"})


def test_disabled_plugin_registers_nothing(tmp_path: Path) -> None:
    (tmp_path / "greeter.py").write_text(GOOD_PLUGIN, encoding="utf-8")
    registry = PluginRegistry()
    config = _config(tmp_path / "greeter.py", entries={"greeter": PluginEntry(enabled=False)})
    statuses = {s.id: s for s in load_plugins(config, registry)}
    assert statuses["greeter"].enabled is False
    assert registry.plugin_tools() == []
    assert registry.hooks.after_tool_call == []


def test_failing_register_rolls_back_what_it_added(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(FAILING_PLUGIN, encoding="utf-8")
    registry = PluginRegistry()
    statuses = {s.id: s for s in load_plugins(_config(tmp_path / "broken.py"), registry)}
    assert statuses["broken"].loaded is False
    assert "RuntimeError: boom" in (statuses["broken"].error or "")
    assert registry.plugin_tools() == []


def test_missing_or_invalid_plugin_path_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_text("x = 1\n", encoding="utf-8")
    registry = PluginRegistry()
    statuses = load_plugins(_config(tmp_path / "nope.py", tmp_path / "empty.py"), registry)
    errors = {s.id: s.error for s in statuses if s.error}
    assert "no such plugin" in (errors["nope"] or "")
    assert "does not provide" in (errors["empty"] or "")


def test_bundled_example_is_found_through_its_entry_point_and_off_by_default() -> None:
    registry = PluginRegistry()
    statuses = {s.id: s for s in load_plugins(PluginsConfig(), registry)}
    assert statuses["notes"].source.startswith("entry point notes")
    assert statuses["notes"].enabled is False


def test_remove_owner_drops_tools_hooks_and_engines(tmp_path: Path) -> None:
    (tmp_path / "greeter.py").write_text(GOOD_PLUGIN, encoding="utf-8")
    registry = PluginRegistry()
    load_plugins(_config(tmp_path / "greeter.py"), registry)
    registry.remove_owner("greeter")
    assert registry.plugin_tools() == []
    assert registry.hooks.after_tool_call == []


def test_a_plugin_module_that_exits_while_imported_is_reported_and_nodmix_goes_on(
    tmp_path: Path,
) -> None:
    # A script-like module (`parse_args()` or `sys.exit()` at import) raises SystemExit,
    # which is no Exception: it must not end the gateway or the CLI that loads it.
    (tmp_path / "quits.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    (tmp_path / "greeter.py").write_text(GOOD_PLUGIN, encoding="utf-8")
    (tmp_path / "leaves.py").write_text(
        "import sys\nfrom nodmix.plugins import Plugin\n"
        "plugin = Plugin(id='leaves', name='Leaves', register=lambda api: sys.exit(0))\n",
        encoding="utf-8",
    )
    registry = PluginRegistry()
    config = _config(tmp_path / "quits.py", tmp_path / "leaves.py", tmp_path / "greeter.py")
    statuses = {s.id: s for s in load_plugins(config, registry)}
    assert "import failed: SystemExit: 3" in (statuses["quits"].error or "")
    assert "register() failed: SystemExit" in (statuses["leaves"].error or "")
    assert statuses["greeter"].loaded is True
