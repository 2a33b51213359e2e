"""Find plugins (entry points and `plugins.load.paths`) and register the enabled ones."""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec

from nodmix.config.schema import PluginsConfig
from nodmix.plugins.api import Plugin, PluginAPI
from nodmix.plugins.entry_cache import cache_path, cached_scan, scan
from nodmix.plugins.registry import PluginRegistry, PluginStatus

ENTRY_POINT_GROUP = "nodmix.plugins"
BUNDLED_DIST = "nodmix"
log = logging.getLogger("nodmix.plugins")


class Candidate(msgspec.Struct, frozen=True):
    """A discovered plugin, or the reason it could not even be imported."""

    source: str
    plugin: Plugin | None
    error: str | None = None
    id_hint: str = ""
    bundled: bool = False
    """An entry point of the `nodmix` distribution itself."""


def discover(
    config: PluginsConfig, *, base_dir: Path | None = None, state_dir: Path | None = None
) -> list[Candidate]:
    """Every plugin visible to this process, in a stable order (entry points, then paths).
    With `state_dir`, the installed distributions' entry points are kept in its cache
    between processes (`nodmix.plugins.entry_cache`) instead of scanned each time."""
    found = list(_from_entry_points(state_dir))
    for text in config.load.paths:
        path = Path(text).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        found.append(from_path(path))
    return found


def _from_entry_points(state_dir: Path | None) -> Iterator[Candidate]:
    from importlib.metadata import EntryPoint

    if state_dir is None:
        found = scan(ENTRY_POINT_GROUP)
    else:
        found = cached_scan(ENTRY_POINT_GROUP, cache_path(state_dir))
    for row in found:
        ep = EntryPoint(row.name, row.value, ENTRY_POINT_GROUP)
        source = f"entry point {ep.name} ({row.dist})"
        bundled = row.dist == BUNDLED_DIST
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:  # a broken third-party plugin must not stop Nodmix
            error = f"import failed: {type(exc).__name__}: {exc}"
            yield Candidate(source, None, error, ep.name, bundled=bundled)
            continue
        yield msgspec.structs.replace(_check(obj, source, ep.name), bundled=bundled)


def from_path(path: Path) -> Candidate:
    """The plugin a `.py` file or package folder defines as `plugin` (imported afresh)."""
    source = str(path)
    target = path / "__init__.py" if path.is_dir() else path
    if not target.is_file():
        return Candidate(source, None, "no such plugin file or package", path.stem)
    name = f"nodmix_local_plugin_{path.stem}_{abs(hash(str(path))) % 10_000}"
    try:
        spec = importlib.util.spec_from_file_location(
            name, target, submodule_search_locations=[str(path)] if path.is_dir() else None
        )
        if spec is None or spec.loader is None:
            return Candidate(source, None, "cannot be imported", path.stem)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # `sys.exit()` or `parse_args()` at import too
        return Candidate(source, None, f"import failed: {type(exc).__name__}: {exc}", path.stem)
    return _check(getattr(module, "plugin", None), source, path.stem)


def _check(obj: object, source: str, id_hint: str) -> Candidate:
    if isinstance(obj, Plugin):
        return Candidate(source, obj, id_hint=obj.id)
    return Candidate(source, None, "does not provide a nodmix.plugins.Plugin", id_hint)


def is_enabled(config: PluginsConfig, plugin: Plugin) -> bool:
    """`plugins.entries.<id>.enabled` when set, else the plugin's default."""
    entry = config.entries.get(plugin.id)
    return plugin.default_enabled if entry is None else entry.enabled


def load_plugins(
    config: PluginsConfig,
    registry: PluginRegistry,
    *,
    base_dir: Path | None = None,
    state_dir: Path | None = None,
) -> list[PluginStatus]:
    """Register every enabled plugin; failures are recorded in its status, never raised.
    `state_dir`: keep the installed entry points in its cache (see `discover`)."""
    statuses: list[PluginStatus] = []
    for cand in discover(config, base_dir=base_dir, state_dir=state_dir):
        plugin = cand.plugin
        if plugin is None:
            status = PluginStatus(
                id=cand.id_hint,
                name=cand.id_hint,
                source=cand.source,
                enabled=True,
                loaded=False,
                error=cand.error,
            )
            log.warning("plugin %s (%s) failed: %s", cand.id_hint, cand.source, cand.error)
        elif plugin.id in registry.statuses:
            first = registry.statuses[plugin.id].source
            status = PluginStatus(
                id=plugin.id,
                name=plugin.name,
                source=cand.source,
                enabled=True,
                loaded=False,
                error=f"duplicate plugin id (first loaded from {first})",
            )
        else:
            status = _register(config, registry, plugin, cand.source, bundled=cand.bundled)
        registry.statuses.setdefault(status.id, status)
        statuses.append(status)
    return statuses


def _register(
    config: PluginsConfig, registry: PluginRegistry, plugin: Plugin, source: str, *, bundled: bool
) -> PluginStatus:
    enabled = is_enabled(config, plugin)
    error = None
    if enabled:
        entry = config.entries.get(plugin.id)
        api = PluginAPI(plugin.id, dict(entry.config) if entry else {}, registry)
        try:
            plugin.register(api)
        except (Exception, SystemExit) as exc:
            registry.remove_owner(plugin.id)  # roll back whatever it registered before failing
            error = f"register() failed: {type(exc).__name__}: {exc}"
            log.warning("plugin %s failed to register: %s", plugin.id, error)
    return PluginStatus(
        id=plugin.id,
        name=plugin.name,
        source=source,
        enabled=enabled,
        loaded=enabled and error is None,
        description=plugin.description,
        version=plugin.version,
        error=error,
        bundled=bundled,
    )
