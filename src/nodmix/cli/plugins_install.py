"""`nodmix plugins install [-l] PATH|WHEEL|NAME` and `nodmix plugins uninstall NAME`."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(cmds: Any, parent: argparse.ArgumentParser) -> None:
    """Add `install` and `uninstall` to the `plugins` group."""
    p = cmds.add_parser(
        "install",
        parents=[parent],
        help="pip-install a plugin (folder, wheel or package name) and enable it; -l links "
        "one under development",
        description=(
            "Install a plugin package into the environment Nodmix runs in (sys.executable -m "
            "pip), check that it publishes a working 'nodmix.plugins' entry point, and enable "
            "it in nodmix.json. A package without one is removed again."
        ),
    )
    p.add_argument("target", metavar="PATH|WHEEL|NAME")
    p.add_argument("--no-enable", action="store_true", help="install but leave it disabled")
    p.add_argument(
        "-l",
        "--link",
        action="store_true",
        help="link a plugin under development from PATH instead of copying it: a project "
        "folder is installed editable (pip install -e), a plain module is added to "
        "plugins.load.paths",
    )
    p.set_defaults(handler=_install)
    p = cmds.add_parser(
        "uninstall",
        parents=[parent],
        help="pip-uninstall a plugin package (or unlink a linked module) and drop its settings",
    )
    p.add_argument("name", metavar="NAME", help="plugin id, entry-point name or package name")
    p.set_defaults(handler=_uninstall)


def _install(args: argparse.Namespace) -> int:
    from nodmix.config.edit import set_value, write_document
    from nodmix.config.loader import load_config
    from nodmix.plugins.install import install

    if args.link:
        return _link(args)
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


def _link(args: argparse.Namespace) -> int:
    from nodmix.config.edit import set_value, write_document
    from nodmix.config.loader import load_config
    from nodmix.plugins.install import link

    state = "left disabled" if args.no_enable else "enabled"
    linked = link(args.target)
    loaded = load_config()
    doc = loaded.raw
    if linked.editable:
        print(f"linked {linked.path} (editable pip install: its code is imported from there)")
        if not linked.plugins:
            print("it was already linked; nothing changed (`plugins list` shows it)")
        for plugin in linked.plugins:
            print(f"{plugin.dist} {plugin.version}: plugin {plugin.id} {state}")
            doc = set_value(doc, f"plugins.entries.{plugin.id}.enabled", not args.no_enable)
    else:
        paths = list(loaded.config.plugins.load.paths)
        if not any(_same_path(loaded, p, linked.path) for p in paths):
            doc = set_value(doc, "plugins.load.paths", [*paths, str(linked.path)])
        doc = set_value(doc, f"plugins.entries.{linked.plugin_id}.enabled", not args.no_enable)
        print(f"linked {linked.path} (plugins.load.paths): plugin {linked.plugin_id} {state}")
    print("edits to its code apply at the next start (a running gateway: when nodmix.json changes)")
    if doc != loaded.raw:
        write_document(loaded.path, doc)
        print(f"updated {loaded.path}")
    return 0


def _same_path(loaded: Any, text: str, path: Any) -> bool:
    from pathlib import Path

    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = Path(loaded.path).parent / candidate
    return bool(candidate.resolve() == path)


def _linked_module(loaded: Any, name: str) -> tuple[str, str] | None:
    """The `plugins.load.paths` entry and plugin id of a linked module that `name` names (its
    plugin id or its path)."""
    from pathlib import Path

    from nodmix.plugins.loader import from_path

    for text in loaded.config.plugins.load.paths:
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = Path(loaded.path).parent / path
        found = from_path(path)
        plugin_id = found.plugin.id if found.plugin is not None else found.id_hint
        named = Path(name).expanduser()
        if name == plugin_id or (named.exists() and named.resolve() == path.resolve()):
            return text, plugin_id
    return None


def _unlink(loaded: Any, text: str, plugin_id: str) -> int:
    from nodmix.config.edit import set_value, unset_value, write_document
    from nodmix.plugins.slots import describe, reset_slots_for_plugin

    doc, resets = reset_slots_for_plugin(loaded, loaded.raw, plugin_id)
    paths = [p for p in loaded.config.plugins.load.paths if p != text]
    doc = set_value(doc, "plugins.load.paths", paths)
    if plugin_id in loaded.config.plugins.entries:
        doc = unset_value(doc, f"plugins.entries.{plugin_id}")
    write_document(loaded.path, doc)
    print(f"unlinked {text} (plugin {plugin_id}); the folder itself is untouched")
    for line in describe(resets):
        print(line)
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    from nodmix.config.edit import unset_value, write_document
    from nodmix.config.loader import load_config
    from nodmix.plugins.install import uninstall
    from nodmix.plugins.slots import describe, reset_slots_for_plugin

    loaded = load_config()
    linked = _linked_module(loaded, args.name)
    if linked is not None:
        return _unlink(loaded, *linked)
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
