"""Which context engine is active, and is it healthy? (for `nodmix doctor` and the gateway).

Also the rule for uninstalling: disabling the plugin that provides the selected engine resets
`plugins.slots.contextEngine` to `legacy`, so the next run does not fail on a missing engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nodmix.context.legacy import LEGACY_ENGINE_ID
from nodmix.errors import NodmixError

if TYPE_CHECKING:
    from nodmix.config.loader import LoadedConfig
    from nodmix.config.schema import NodmixConfig
    from nodmix.context.base import ContextEngine
    from nodmix.plugins.registry import PluginRegistry

SLOT_KEY = "plugins.slots.contextEngine"


class EngineHost(Protocol):
    """What the status report needs from the runtime."""

    @property
    def config(self) -> NodmixConfig: ...

    @property
    def registry(self) -> PluginRegistry: ...

    @property
    def engine_failures(self) -> Mapping[str, str]: ...

    def context_engine(self) -> ContextEngine: ...


def context_engine_status(host: EngineHost) -> dict[str, Any]:
    """The selected engine, whether it resolves, and its latest failure.

    Keys: `slot` (configured value or `None`), `engineId`, `owner` (plugin id or `core`),
    `registered` (every engine id), `ok`, and when resolved `name`, `version`,
    `ownsCompaction`; `error` holds the resolution failure or the latest runtime failure.
    """
    slot = host.config.plugins.slots.context_engine
    engine_id = slot or LEGACY_ENGINE_ID
    registered = host.registry.context_engines
    owned = registered.get(engine_id)
    report: dict[str, Any] = {
        "slot": slot,
        "engineId": engine_id,
        "owner": owned.owner if owned else None,
        "registered": sorted(registered),
        "ok": True,
        "error": None,
    }
    try:
        engine = host.context_engine()
    except NodmixError as exc:
        report.update(ok=False, error=str(exc))
        return report
    info = engine.info
    report.update(
        name=info.name,
        version=info.version,
        ownsCompaction=info.owns_compaction,
    )
    failure = host.engine_failures.get(engine_id)
    if failure:
        report.update(ok=False, error=failure)
    return report


def engine_ids_of_plugin(loaded: LoadedConfig, plugin_id: str) -> set[str]:
    """Context engine ids a plugin registers (it is loaded as if enabled to find out)."""
    from nodmix.plugins.slots import provided_by

    registry = provided_by(loaded, plugin_id)
    return {name for name, owned in registry.context_engines.items() if owned.owner == plugin_id}


def reset_slot_for_disabled_plugin(
    loaded: LoadedConfig, doc: dict[str, Any], plugin_id: str
) -> tuple[dict[str, Any], str | None]:
    """Reset the context-engine slot to `legacy` when `plugin_id` provides the selected engine.

    Call it from `nodmix plugins disable` (and uninstall) with the document about to be
    written.

    Returns:
        The (possibly changed) document, and the engine id that was deselected or `None`.
    """
    from nodmix.config.edit import set_value

    selected = loaded.config.plugins.slots.context_engine
    if not selected or selected == LEGACY_ENGINE_ID:
        return doc, None
    if selected not in engine_ids_of_plugin(loaded, plugin_id):
        return doc, None
    return set_value(doc, SLOT_KEY, LEGACY_ENGINE_ID), selected
