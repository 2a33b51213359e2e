"""The memory of a running Nodmix: the built-in service from the `memory` config section, and
the backend `plugins.slots.memory` selects for each agent (`builtin` by default)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from nodmix.agents import AgentProfile, resolve_agent
from nodmix.config.schema import NodmixConfig
from nodmix.errors import PluginError
from nodmix.hooks import Registered
from nodmix.memory.base import BUILTIN_MEMORY_ID, MemoryBackend, MemoryContext
from nodmix.memory.builtin import CheckedMemory, builtin_memory, check_memory_shape
from nodmix.memory.service import WRITING_TOOLS, MemoryService
from nodmix.memory.settings import resolve_memory_settings
from nodmix.plugins import PluginRegistry
from nodmix.plugins.registry import CORE_OWNER


def open_memory(
    config: NodmixConfig, env: Mapping[str, str], state_dir: Path, registry: PluginRegistry
) -> MemoryService:
    """The memory service, registered in `registry` (see `register_builtin_memory`)."""
    service = MemoryService(
        resolve_memory_settings(config.memory, env),
        state_dir=state_dir,
        workspace_for=lambda agent_id: resolve_agent(config, agent_id, env=env).workspace,
    )
    register_builtin_memory(registry, service)
    return service


def register_builtin_memory(registry: PluginRegistry, service: MemoryService) -> None:
    """Offer the built-in backend as `builtin`; its `after_tool_call` hook keeps indexes fresh
    after file writes (a plugin reload builds a new registry: call it again there)."""
    registry.add_memory(CORE_OWNER, BUILTIN_MEMORY_ID, builtin_memory(service))
    if service.settings.enabled:
        # Only writes concern it, so other calls (a quick tool in code mode) need no hook.
        registry.hooks.after_tool_call.append(
            Registered(CORE_OWNER, service.after_tool_call, tools=WRITING_TOOLS)
        )


class MemoryBackends:
    """The backend `plugins.slots.memory` selects, created on first use for each agent and
    cached (config and registry are read through getters: a reload replaces them)."""

    def __init__(
        self,
        config: Callable[[], NodmixConfig],
        registry: Callable[[], PluginRegistry],
        agent: Callable[[str], AgentProfile],
        *,
        state_dir: Path,
    ) -> None:
        self._config = config
        self._registry = registry
        self._agent = agent
        self._state_dir = state_dir
        self._backends: dict[tuple[str, str], MemoryBackend] = {}
        self.failures: dict[str, str] = {}
        """Latest failure per memory backend id (for `nodmix doctor`)."""

    def selected_id(self) -> str:
        """The configured slot, `builtin` when unset."""
        return self._config().plugins.slots.memory or BUILTIN_MEMORY_ID

    def for_agent(self, agent_id: str) -> MemoryBackend:
        """The selected backend for `agent_id`.

        Raises:
            PluginError: the selected backend is not registered or broke its contract.
        """
        memory_id = self.selected_id()
        cached = self._backends.get((memory_id, agent_id))
        if cached is not None:
            return cached
        registry = self._registry()
        owned = registry.memories.get(memory_id)
        if owned is None:
            known = ", ".join(sorted(registry.memories)) or "none"
            message = (
                f"memory backend {memory_id!r} (plugins.slots.memory) is not registered "
                f"(registered: {known}); enable the plugin that provides it or set the slot "
                f"back to '{BUILTIN_MEMORY_ID}'"
            )
            self.failures[memory_id] = message
            raise PluginError(message)
        agent = self._agent(agent_id)
        entry = self._config().plugins.entries.get(owned.owner)
        ctx = MemoryContext(
            agent_id=agent_id,
            config=dict(entry.config) if entry else {},
            agent_dir=self._state_dir / "agents" / agent_id,
            workspace_dir=agent.workspace,
        )
        try:
            backend = owned.value(ctx)
            if owned.owner != CORE_OWNER:
                check_memory_shape(backend, memory_id, owned.owner)
                backend = CheckedMemory(backend, memory_id, owned.owner)
        except PluginError as exc:
            self.failures[memory_id] = str(exc)
            raise
        except Exception as exc:
            message = (
                f"memory backend {memory_id!r} from plugin {owned.owner!r} failed to start: "
                f"{type(exc).__name__}: {exc}"
            )
            self.failures[memory_id] = message
            raise PluginError(message) from None
        self._backends[(memory_id, agent_id)] = backend
        return backend

    def clear(self) -> None:
        """Forget the cached backends (a reload changed the plugins)."""
        self._backends.clear()
