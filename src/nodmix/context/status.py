"""Which context engine is active, and is it healthy? (for `nodmix doctor` and the gateway).

Disabling the plugin that provides the selected engine resets the slot (`plugins.slots`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nodmix.context.legacy import LEGACY_ENGINE_ID
from nodmix.errors import NodmixError

if TYPE_CHECKING:
    from nodmix.config.schema import NodmixConfig
    from nodmix.context.base import ContextEngine


class Registered(Protocol):
    """A registered engine as the report sees it (the plugin registry's entry)."""

    @property
    def owner(self) -> str: ...


class EngineTable(Protocol):
    """The engines registered by id (the runtime's plugin registry)."""

    @property
    def context_engines(self) -> Mapping[str, Registered]: ...


class EngineHost(Protocol):
    """What the status report needs from the runtime."""

    @property
    def config(self) -> NodmixConfig: ...

    @property
    def registry(self) -> EngineTable: ...

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
