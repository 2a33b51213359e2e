"""Typed registries for what plugins (and Nodmix itself) register, keyed by owner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

import msgspec

from nodmix.compaction.base import CompactionProvider
from nodmix.context.base import ContextEngineFactory
from nodmix.errors import PluginError
from nodmix.hooks import Hooks
from nodmix.memory.base import MemoryFactory
from nodmix.tools.base import Tool

if TYPE_CHECKING:
    from nodmix.codemode.namespaces import NamespaceRegistration

CORE_OWNER = "core"

T = TypeVar("T")


class Owned(msgspec.Struct, Generic[T], frozen=True):
    """A registered value and the plugin that registered it."""

    owner: str
    value: T


class PluginStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What happened to one discovered plugin."""

    id: str
    name: str
    source: str
    enabled: bool
    loaded: bool
    description: str = ""
    version: str = "0"
    error: str | None = None
    bundled: bool = False
    """Shipped with Nodmix itself (an entry point of the `nodmix` distribution)."""


class PluginRegistry(msgspec.Struct):
    """Everything registered in this process. Built-ins register with owner `core`."""

    tools: list[Owned[Tool]] = msgspec.field(default_factory=list)
    hooks: Hooks = msgspec.field(default_factory=Hooks)
    context_engines: dict[str, Owned[ContextEngineFactory]] = msgspec.field(default_factory=dict)
    namespaces: dict[str, Owned[NamespaceRegistration]] = msgspec.field(default_factory=dict)
    compaction_providers: dict[str, Owned[CompactionProvider]] = msgspec.field(default_factory=dict)
    memories: dict[str, Owned[MemoryFactory]] = msgspec.field(default_factory=dict)
    """Memory backends by id (`plugins.slots.memory` selects one; `builtin` by default)."""
    statuses: dict[str, PluginStatus] = msgspec.field(default_factory=dict)

    def add_tool(self, owner: str, tool: Tool) -> None:
        """Register a tool; names must be unique across owners."""
        for existing in self.tools:
            if existing.value.spec.name == tool.spec.name:
                raise PluginError(
                    f"tool name {tool.spec.name!r} from {owner!r} is already registered by "
                    f"{existing.owner!r}"
                )
        self.tools.append(Owned(owner, tool))

    def add_context_engine(self, owner: str, engine_id: str, factory: ContextEngineFactory) -> None:
        """Register a context engine factory under an id."""
        existing = self.context_engines.get(engine_id)
        if existing is not None and existing.owner != owner:
            raise PluginError(
                f"context engine {engine_id!r} from {owner!r} is already registered by "
                f"{existing.owner!r}"
            )
        self.context_engines[engine_id] = Owned(owner, factory)

    def add_namespace(self, owner: str, registration: NamespaceRegistration) -> None:
        """Register a code-mode namespace (validated now; visibility is decided per run)."""
        from nodmix.codemode.namespaces import validate_registration

        try:
            validate_registration(registration)
        except ValueError as exc:
            raise PluginError(f"plugin {owner!r}: {exc}") from None
        existing = self.namespaces.get(registration.id)
        if existing is not None and existing.owner != owner:
            raise PluginError(
                f"code-mode namespace {registration.id!r} from {owner!r} is already registered "
                f"by {existing.owner!r}"
            )
        self.namespaces[registration.id] = Owned(owner, registration)

    def clear_namespaces(self, owner: str) -> None:
        """Drop a plugin's namespaces (rollback, disable, uninstall)."""
        self.namespaces = {k: v for k, v in self.namespaces.items() if v.owner != owner}

    def add_compaction_provider(
        self, owner: str, provider_id: str, provider: CompactionProvider
    ) -> None:
        """Register a compaction provider under an id (`compaction.provider` selects it)."""
        existing = self.compaction_providers.get(provider_id)
        if existing is not None and existing.owner != owner:
            raise PluginError(
                f"compaction provider {provider_id!r} from {owner!r} is already registered by "
                f"{existing.owner!r}"
            )
        self.compaction_providers[provider_id] = Owned(owner, provider)

    def external_plugins(self) -> frozenset[str]:
        """Ids of loaded plugins installed apart from Nodmix (code mode lists their tools
        after the ones Nodmix ships)."""
        return frozenset(s.id for s in self.statuses.values() if not s.bundled)

    def add_memory(self, owner: str, memory_id: str, factory: MemoryFactory) -> None:
        """Register a memory backend factory under an id."""
        existing = self.memories.get(memory_id)
        if existing is not None and existing.owner != owner:
            raise PluginError(
                f"memory backend {memory_id!r} from {owner!r} is already registered by "
                f"{existing.owner!r}"
            )
        self.memories[memory_id] = Owned(owner, factory)

    def plugin_tools(self) -> list[Tool]:
        """Tools registered by plugins (not core)."""
        return [o.value for o in self.tools if o.owner != CORE_OWNER]

    def remove_owner(self, owner: str) -> None:
        """Forget everything a plugin registered (it was disabled or failed half-way)."""
        self.tools = [o for o in self.tools if o.owner != owner]
        self.hooks.remove_owner(owner)
        self.context_engines = {k: v for k, v in self.context_engines.items() if v.owner != owner}
        self.compaction_providers = {
            k: v for k, v in self.compaction_providers.items() if v.owner != owner
        }
        self.memories = {k: v for k, v in self.memories.items() if v.owner != owner}
        self.clear_namespaces(owner)
