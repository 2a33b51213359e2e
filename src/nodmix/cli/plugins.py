"""`nodmix plugins list|enable|disable` (and `install|uninstall`, `plugins_install.py`)."""

from __future__ import annotations

import argparse
from typing import Any

from nodmix.cli.common import common_parent, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `plugins` command group."""
    parser = sub.add_parser("plugins", help="list, install, enable and disable plugins")
    cmds = parser.add_subparsers(dest="plugins_command", metavar="ACTION", required=True)
    parent = common_parent()
    p = cmds.add_parser("list", parents=[parent], help="discovered plugins and their state")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)
    for name, enabled in (("enable", True), ("disable", False)):
        p = cmds.add_parser(name, parents=[parent], help=f"{name} a plugin in nodmix.json")
        p.add_argument("plugin_id")
        p.set_defaults(handler=_toggle, enabled=enabled)
    from nodmix.cli.plugins_install import add_parsers

    add_parsers(cmds, parent)


def _list(args: argparse.Namespace) -> int:
    from nodmix.config.loader import load_config
    from nodmix.plugins import PluginRegistry, load_plugins

    loaded = load_config()
    registry = PluginRegistry()
    statuses = load_plugins(loaded.config.plugins, registry, base_dir=loaded.path.parent)
    rows: list[dict[str, Any]] = []
    for s in statuses:
        tools = sorted(o.value.spec.name for o in registry.tools if o.owner == s.id)
        rows.append(
            {
                "id": s.id,
                "name": s.name,
                "enabled": s.enabled,
                "loaded": s.loaded,
                "source": s.source,
                "version": s.version,
                "description": s.description,
                "tools": tools,
                "error": s.error,
            }
        )
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no plugins found")
    for row in rows:
        state = "error" if row["error"] else ("enabled" if row["enabled"] else "disabled")
        print(f"{row['id']:<16} {state:<9} {row['source']}")
        if row["description"]:
            print(f"{'':<16} {row['description']}")
        if row["tools"]:
            print(f"{'':<16} tools: {', '.join(row['tools'])}")
        if row["error"]:
            print(f"{'':<16} {row['error']}")
    return 0


def _toggle(args: argparse.Namespace) -> int:
    from nodmix.config.edit import set_value, write_document
    from nodmix.config.loader import load_config
    from nodmix.errors import PluginError
    from nodmix.plugins import discover

    loaded = load_config()
    known = {
        c.plugin.id
        for c in discover(loaded.config.plugins, base_dir=loaded.path.parent)
        if c.plugin is not None
    }
    if args.plugin_id not in known:
        listing = ", ".join(sorted(known)) or "none"
        raise PluginError(f"unknown plugin {args.plugin_id!r} (found: {listing})")
    doc = set_value(loaded.raw, f"plugins.entries.{args.plugin_id}.enabled", args.enabled)
    resets: list[Any] = []
    if not args.enabled:
        from nodmix.plugins.slots import reset_slots_for_plugin

        doc, resets = reset_slots_for_plugin(loaded, doc, args.plugin_id)
    write_document(loaded.path, doc)
    verb = "enabled" if args.enabled else "disabled"
    print(f"{verb} plugin {args.plugin_id} in {loaded.path}")
    if resets:
        from nodmix.plugins.slots import describe

        print("\n".join(describe(resets)))
    return 0
