"""Applying a changed `nodmix.json` to a running `Runtime` (the gateway's live reload).

What applies at once: `models` (a new provider router), `agents` and `tools` (read from the
config on every turn), `plugins` (a fresh registry; engines of the old one are disposed at
shutdown) and `mcp` (servers of the new config start lazily; the old manager closes its
servers). Turns already running finish on what they started with. `gateway` settings (port,
bind, token) belong to the server socket and need a restart: `RESTART_SECTIONS`.

MCP servers of the new config start in a fresh holder (`mcp_holder.py`); the old one is closed
by the task that opened it.
"""

from __future__ import annotations

import contextlib
import logging

from nodmix.config import LoadedConfig
from nodmix.runtime.host import RuntimeHost
from nodmix.runtime.mcp_holder import open_mcp

log = logging.getLogger("nodmix.runtime")

LIVE_SECTIONS = ("models", "agents", "tools", "plugins", "mcp", "skills", "hooks", "messages")
"""Top-level sections a running gateway applies without a restart."""
RESTART_SECTIONS = ("gateway", "automation")
"""Sections that only a restart applies."""


async def apply_config(runtime: RuntimeHost, loaded: LoadedConfig, changed: list[str]) -> list[str]:
    """Apply the live `changed` sections of `loaded` to `runtime`; returns what was applied."""
    new = loaded.config
    applied = [name for name in changed if name in LIVE_SECTIONS]
    if not applied:
        return []
    if "models" in applied:
        from nodmix.providers.router import ProviderRouter

        old_router = runtime.router
        runtime.router = ProviderRouter(new.models, runtime.env)
        runtime.compaction.models = runtime.router
        runtime.retired.append(old_router.aclose)
    if "plugins" in applied:
        _swap_plugins(runtime, loaded)
    if "mcp" in applied:
        await _swap_mcp(runtime, loaded)
    runtime.loaded = loaded
    runtime.config = new
    log.info("configuration applied (%s)", ", ".join(applied))
    return applied


def _swap_plugins(runtime: RuntimeHost, loaded: LoadedConfig) -> None:
    from nodmix.context.legacy import LEGACY_ENGINE_ID, legacy_factory
    from nodmix.plugins import PluginRegistry, load_plugins
    from nodmix.plugins.registry import CORE_OWNER
    from nodmix.runtime.memory import register_builtin_memory
    from nodmix.runtime.toolset import PluginTools
    from nodmix.tools.executor import ToolExecutor

    registry = PluginRegistry()
    registry.add_context_engine(CORE_OWNER, LEGACY_ENGINE_ID, legacy_factory)
    register_builtin_memory(registry, runtime.services["memory"])
    statuses = load_plugins(
        loaded.config.plugins, registry, base_dir=loaded.path.parent, state_dir=runtime.state_dir
    )
    old_tools = next(s for s in runtime.tool_sources if isinstance(s, PluginTools))
    runtime.tool_sources[runtime.tool_sources.index(old_tools)] = PluginTools(registry)
    runtime.registry = registry
    runtime.plugin_statuses = statuses
    executor = ToolExecutor(registry.hooks)
    executor.gate = runtime.executor.gate  # exec policy and approvals outlive the plugin swap
    runtime.executor = executor
    runtime.retire_engines()
    runtime.memory_backends.clear()


async def _swap_mcp(runtime: RuntimeHost, loaded: LoadedConfig) -> None:
    old = runtime.mcp_holder
    holder = await open_mcp(loaded.config.mcp.servers, runtime.env, runtime.background)
    old_manager = old.manager if old is not None else None
    if old_manager is not None and old_manager in runtime.tool_sources:
        runtime.tool_sources.remove(old_manager)
    if holder is not None:
        runtime.tool_sources.append(holder.manager)
    runtime.services["mcp"] = holder.manager if holder is not None else None
    runtime.mcp_holder = holder
    if old is not None:
        with contextlib.suppress(Exception):
            await old.close()
