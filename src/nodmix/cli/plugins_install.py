"""`nodmix plugins install PATH|WHEEL|NAME` and `nodmix plugins uninstall NAME`."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(cmds: Any, parent: argparse.ArgumentParser) -> None:
    """Add `install` and `uninstall` to the `plugins` group."""
    p = cmds.add_parser(
        "install",
        parents=[parent],
        help="pip-install a plugin (folder, wheel or package name) and enable it",
        description=(
            "Install a plugin package into the environment Nodmix runs in (sys.executable -m "
            "pip), check that it publishes a working 'nodmix.plugins' entry point, and enable "
            "it in nodmix.json. A package without one is removed again."
        ),
    )
    p.add_argument("target", metavar="PATH|WHEEL|NAME")
    p.add_argument("--no-enable", action="store_true", help="install but leave it disabled")
    p.set_defaults(handler=_install)
    p = cmds.add_parser(
        "uninstall",
        parents=[parent],
        help="pip-uninstall a plugin package and drop its settings",
    )
    p.add_argument("name", metavar="NAME", help="plugin id, entry-point name or package name")
    p.set_defaults(handler=_uninstall)


def _install(args: argparse.Namespace) -> int:
    from nodmix.config.edit import set_value, write_document
    from nodmix.config.loader import load_config
    from nodmix.plugins.install import install

    print(f"installing {args.target} with pip ...", flush=True)
    plugins = install(args.target)
    if not plugins:
        print(f"{args.target} is already installed; nothing changed (`plugins list` shows it)")
        return 0
    loaded = load_config()
    doc = loaded.raw
    for plugin in plugins:
        state = "installed, left disabled" if args.no_enable else "installed and enabled"
        print(f"{plugin.dist} {plugin.version}: plugin {plugin.id} {state}")
        doc = set_value(doc, f"plugins.entries.{plugin.id}.enabled", not args.no_enable)
    if doc != loaded.raw:
        write_document(loaded.path, doc)
        print(f"updated {loaded.path}")
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    from nodmix.config.edit import unset_value, write_document
    from nodmix.config.loader import load_config
    from nodmix.plugins.install import uninstall
    from nodmix.plugins.slots import describe, reset_slots_for_plugin

    loaded = load_config()
    dist, plugin_ids = _find(args.name)
    doc = loaded.raw
    resets = []
    for plugin_id in plugin_ids:  # before pip removes the code that says what it provides
        doc, reset = reset_slots_for_plugin(loaded, doc, plugin_id)
        resets.extend(reset)
        if plugin_id in loaded.config.plugins.entries:
            doc = unset_value(doc, f"plugins.entries.{plugin_id}")
    uninstall(dist)
    print(f"uninstalled {dist} (plugin {', '.join(plugin_ids)})")
    if doc != loaded.raw:
        write_document(loaded.path, doc)
        print(f"updated {loaded.path}")
    for line in describe(resets):
        print(line)
    return 0


def _find(name: str) -> tuple[str, list[str]]:
    """The distribution that provides plugin/entry point/package `name`, and its plugin ids."""
    from importlib.metadata import entry_points

    from nodmix.errors import PluginError
    from nodmix.plugins.api import Plugin
    from nodmix.plugins.install import normalize
    from nodmix.plugins.loader import ENTRY_POINT_GROUP

    by_dist: dict[str, list[str]] = {}
    match: str | None = None
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else ""
        try:
            obj = ep.load()
        except Exception:  # a broken plugin can still be uninstalled by its names
            obj = None
        plugin_id = obj.id if isinstance(obj, Plugin) else ep.name
        by_dist.setdefault(dist, []).append(plugin_id)
        if name in (ep.name, plugin_id) or normalize(name) == normalize(dist):
            match = dist
    if not match:
        known = ", ".join(sorted(i for ids in by_dist.values() for i in ids)) or "none"
        raise PluginError(f"no installed plugin package provides {name!r} (installed: {known})")
    if normalize(match) == "nodmix":
        raise PluginError(f"{name!r} is built into Nodmix; disable it with `plugins disable`")
    return match, by_dist[match]
