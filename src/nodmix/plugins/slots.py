"""`plugins.slots`: exclusive choices among what plugins register, and their defaults.

A slot names one registered implementation: `contextEngine` (default `legacy`) and `memory`
(default `builtin`). Disabling or uninstalling the plugin that provides a slot's selection
resets that slot to its default, so the next run does not fail on something that is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from nodmix.config.loader import LoadedConfig
    from nodmix.plugins.registry import PluginRegistry


@dataclass(frozen=True, slots=True)
class Slot:
    """One slot: its config key, the registry table it selects from, and its default."""

    key: str
    field: str
    """`PluginSlots` attribute."""
    table: str
    """`PluginRegistry` attribute holding the choices."""
    default: str


SLOTS: Final = (
    Slot("plugins.slots.contextEngine", "context_engine", "context_engines", "legacy"),
    Slot("plugins.slots.memory", "memory", "memories", "builtin"),
)


@dataclass(frozen=True, slots=True)
class SlotReset:
    """A slot that pointed at a disabled plugin's implementation and went back to default."""

    slot: Slot
    was: str


def provided_by(loaded: LoadedConfig, plugin_id: str) -> PluginRegistry:
    """What a plugin registers (it is loaded as if enabled to find out)."""
    from nodmix.config.schema import PluginEntry
    from nodmix.plugins import PluginRegistry, load_plugins

    plugins = loaded.config.plugins
    entry = plugins.entries.get(plugin_id) or PluginEntry()
    enabled = msgspec.structs.replace(
        plugins,
        entries={**plugins.entries, plugin_id: msgspec.structs.replace(entry, enabled=True)},
    )
    registry = PluginRegistry()
    load_plugins(enabled, registry, base_dir=Path(loaded.path).parent)
    return registry


def reset_slots_for_plugin(
    loaded: LoadedConfig, doc: dict[str, Any], plugin_id: str
) -> tuple[dict[str, Any], list[SlotReset]]:
    """Reset every slot whose selection `plugin_id` provides; call it from `plugins disable`
    and `uninstall` with the document about to be written (before the code is gone).

    Returns:
        The (possibly changed) document, and the slots that were reset.
    """
    from nodmix.config.edit import set_value

    slots = loaded.config.plugins.slots
    chosen = [(s, getattr(slots, s.field)) for s in SLOTS]
    chosen = [(s, value) for s, value in chosen if value and value != s.default]
    if not chosen:
        return doc, []
    registry = provided_by(loaded, plugin_id)
    resets = []
    for slot, value in chosen:
        owned = getattr(registry, slot.table).get(value)
        if owned is not None and owned.owner == plugin_id:
            doc = set_value(doc, slot.key, slot.default)
            resets.append(SlotReset(slot, value))
    return doc, resets


def describe(resets: list[SlotReset]) -> list[str]:
    """One line per reset slot, for the CLI."""
    return [
        f"{r.slot.key} was {r.was!r} (this plugin's); reset to {r.slot.default!r}" for r in resets
    ]
