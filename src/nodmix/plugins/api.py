"""What a plugin is and the API its `register(api)` receives."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from nodmix.compaction.base import CompactionProvider
from nodmix.context.base import ContextEngineFactory
from nodmix.errors import PluginError
from nodmix.hooks import (
    AfterToolCallHook,
    BeforeToolCallHook,
    CompactionHook,
    Registered,
)
from nodmix.memory.base import MemoryFactory
from nodmix.tools.base import FunctionTool, Tool, ToolFunction, ToolOrigin

if TYPE_CHECKING:
    from nodmix.codemode.namespaces import NamespaceRegistration
    from nodmix.plugins.registry import PluginRegistry


class Plugin(msgspec.Struct, frozen=True, kw_only=True):
    """A plugin: an id and a `register` function.

    Publish it through the `nodmix.plugins` entry-point group (the entry point names this object)
    or put a module defining `plugin = Plugin(...)` on a path listed in `plugins.load.paths`.
    """

    id: str
    name: str
    register: Callable[[PluginAPI], None]
    description: str = ""
    version: str = "0"
    default_enabled: bool = True
    """Whether the plugin runs when `plugins.entries.<id>.enabled` is not set."""


class PluginAPI:
    """Handed to `Plugin.register`. Everything registered here is owned by the plugin id."""

    def __init__(self, plugin_id: str, config: Mapping[str, Any], registry: PluginRegistry) -> None:
        self.plugin_id = plugin_id
        self.config: Mapping[str, Any] = config
        """The plugin's own `plugins.entries.<id>.config`."""
        self.logger = logging.getLogger(f"nodmix.plugins.{plugin_id}")
        self._registry = registry

    # ---- tools --------------------------------------------------------------------------------

    def register_tool(self, tool: Tool) -> None:
        """Add a tool. Its catalog id becomes `nodmix:<plugin id>:<name>`."""
        origin = ToolOrigin(source="nodmix", owner=self.plugin_id, name=tool.spec.name)
        if tool.origin != origin:
            if not isinstance(tool, FunctionTool):
                raise PluginError(
                    f"plugin {self.plugin_id!r}: tool {tool.spec.name!r} must have origin "
                    f"nodmix:{self.plugin_id}:{tool.spec.name}"
                )
            tool = msgspec.structs.replace(tool, origin=origin)
        self._registry.add_tool(self.plugin_id, tool)

    def tool(
        self,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> Callable[[ToolFunction], ToolFunction]:
        """Decorator form of `register_tool` for an async `fn(args, ctx) -> ToolResult`."""

        def decorate(fn: ToolFunction) -> ToolFunction:
            self.register_tool(
                FunctionTool.create(
                    fn,
                    name=name,
                    description=description,
                    parameters=parameters,
                    owner=self.plugin_id,
                    label=label,
                )
            )
            return fn

        return decorate

    # ---- hooks --------------------------------------------------------------------------------

    def on_before_tool_call(
        self, hook: BeforeToolCallHook, *, tools: Iterable[str] | None = None
    ) -> None:
        """Run `hook` before every tool call (or only calls of the tools named in `tools`); it
        may block the call or rewrite its params."""
        self._registry.hooks.before_tool_call.append(
            Registered(self.plugin_id, hook, _names(tools))
        )

    def on_after_tool_call(
        self, hook: AfterToolCallHook, *, tools: Iterable[str] | None = None
    ) -> None:
        """Run `hook` after every tool call (or only calls of the tools named in `tools`)."""
        self._registry.hooks.after_tool_call.append(Registered(self.plugin_id, hook, _names(tools)))

    def on_before_compaction(self, hook: CompactionHook) -> None:
        """Run `hook` before a session is compacted."""
        self._registry.hooks.before_compaction.append(Registered(self.plugin_id, hook))

    def on_after_compaction(self, hook: CompactionHook) -> None:
        """Run `hook` after a session was compacted."""
        self._registry.hooks.after_compaction.append(Registered(self.plugin_id, hook))

    # ---- context ------------------------------------------------------------------------------

    def register_context_engine(self, engine_id: str, factory: ContextEngineFactory) -> None:
        """Offer a context engine; `plugins.slots.contextEngine` selects it by `engine_id`."""
        self._registry.add_context_engine(self.plugin_id, engine_id, factory)

    def register_memory(self, memory_id: str, factory: MemoryFactory) -> None:
        """Offer a memory backend (`nodmix.memory.base.MemoryBackend`) that answers
        `memory_search`/`memory_get` in place of the built-in index; `plugins.slots.memory`
        selects it by `memory_id`. `factory(ctx)` is called once per agent."""
        if not callable(factory):
            raise PluginError(f"plugin {self.plugin_id!r}: memory {memory_id!r} needs a factory")
        self._registry.add_memory(self.plugin_id, memory_id, factory)

    # ---- code mode ----------------------------------------------------------------------------

    def register_code_mode_namespace(self, registration: NamespaceRegistration) -> None:
        """Offer a code-mode namespace backed by this plugin's tools (see
        `nodmix.codemode.namespaces`); it is visible in a run only when all its required tools
        are, and they are owned by this plugin."""
        self._registry.add_namespace(self.plugin_id, registration)

    def register_compaction_provider(self, provider_id: str, provider: CompactionProvider) -> None:
        """Offer a summariser for compaction; `compaction.provider` selects it by `provider_id`.

        When it raises or returns nothing, Nodmix falls back to its built-in summary.
        """
        if not callable(getattr(provider, "summarize", None)):
            raise PluginError(
                f"plugin {self.plugin_id!r}: compaction provider {provider_id!r} has no "
                "summarize() method"
            )
        self._registry.add_compaction_provider(self.plugin_id, provider_id, provider)


def _names(tools: Iterable[str] | None) -> frozenset[str] | None:
    # A plain string would be taken letter by letter: name it as one tool.
    if tools is None:
        return None
    return frozenset((tools,) if isinstance(tools, str) else tools)
