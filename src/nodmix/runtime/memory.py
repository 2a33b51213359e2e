"""The memory service of a running Nodmix, built from the `memory` config section."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from nodmix.agents import resolve_agent
from nodmix.config.schema import NodmixConfig
from nodmix.hooks import Registered
from nodmix.memory.service import WRITING_TOOLS, MemoryService
from nodmix.memory.settings import resolve_memory_settings
from nodmix.plugins import PluginRegistry
from nodmix.plugins.registry import CORE_OWNER


def open_memory(
    config: NodmixConfig, env: Mapping[str, str], state_dir: Path, registry: PluginRegistry
) -> MemoryService:
    """The memory service; its `after_tool_call` hook keeps indexes fresh after file writes."""
    service = MemoryService(
        resolve_memory_settings(config.memory, env),
        state_dir=state_dir,
        workspace_for=lambda agent_id: resolve_agent(config, agent_id, env=env).workspace,
    )
    if service.settings.enabled:
        # Only writes concern it, so other calls (a quick tool in code mode) need no hook.
        registry.hooks.after_tool_call.append(
            Registered(CORE_OWNER, service.after_tool_call, tools=WRITING_TOOLS)
        )
    return service
