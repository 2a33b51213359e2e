"""The context engines of a running Nodmix: the one `plugins.slots.contextEngine` selects,
created on first use for each agent and cached, with each engine's latest failure (for
`nodmix doctor`). A factory receives the agent's own directory (`<state>/agents/<id>`) and
workspace, so an engine can keep per-agent state from its first lifecycle call."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from nodmix.agents import AgentProfile
from nodmix.config.schema import NodmixConfig
from nodmix.context.base import ContextEngine, EngineContext
from nodmix.context.checked import create_engine
from nodmix.context.legacy import LEGACY_ENGINE_ID
from nodmix.errors import PluginError
from nodmix.plugins import PluginRegistry
from nodmix.plugins.registry import CORE_OWNER


class ContextEngines:
    """Context engines of the current config and plugins (both read through getters: a
    config reload replaces them)."""

    def __init__(
        self,
        config: Callable[[], NodmixConfig],
        registry: Callable[[], PluginRegistry],
        *,
        state_dir: Path,
        services: dict[str, Any],
    ) -> None:
        self._config = config
        self._registry = registry
        self._state_dir = state_dir
        self._services = services
        self._engines: dict[tuple[str, str], ContextEngine] = {}
        """By engine id and agent id."""
        self.failures: dict[str, str] = {}
        """Latest failure per context engine id."""

    def selected(self, agent: AgentProfile) -> ContextEngine:
        """The engine `plugins.slots.contextEngine` selects (`legacy` by default) for `agent`.

        Raises:
            PluginError: the selected engine is not registered.
        """
        config = self._config()
        engine_id = config.plugins.slots.context_engine or LEGACY_ENGINE_ID
        cached = self._engines.get((engine_id, agent.id))
        if cached is not None:
            return cached
        registry = self._registry()
        owned = registry.context_engines.get(engine_id)
        if owned is None:
            known = ", ".join(sorted(registry.context_engines)) or "none"
            message = (
                f"context engine {engine_id!r} (plugins.slots.contextEngine) is not registered "
                f"(registered: {known}); enable the plugin that provides it or set the slot back "
                "to 'legacy'"
            )
            self.failures[engine_id] = message
            raise PluginError(message)
        entry = config.plugins.entries.get(owned.owner)
        ctx = EngineContext(
            config=dict(entry.config) if entry else {},
            agent_dir=self._state_dir / "agents" / agent.id,
            workspace_dir=agent.workspace,
            services=self._services,
        )
        engine = create_engine(
            owned.value,
            ctx,
            engine_id=engine_id,
            owner=owned.owner,
            trusted=owned.owner == CORE_OWNER,
            on_failure=self._failed,
        )
        self._engines[(engine_id, agent.id)] = engine
        return engine

    def retire(self, retired: list[Callable[[], Awaitable[None]]]) -> None:
        """Drop the cached engines (a reload changed plugins); their disposers go to `retired`
        (run at shutdown: turns may still hold the engines)."""
        engines, self._engines = dict(self._engines), {}
        for engine in engines.values():
            dispose = getattr(engine, "dispose", None)
            if dispose is not None:
                retired.append(dispose)

    async def dispose(self) -> None:
        """Dispose every cached engine (at shutdown); a failing disposer is skipped."""
        for engine in self._engines.values():
            dispose = getattr(engine, "dispose", None)
            if dispose is not None:
                with contextlib.suppress(Exception):
                    await dispose()
        self._engines.clear()

    def _failed(self, engine_id: str, message: str) -> None:
        self.failures[engine_id] = message
