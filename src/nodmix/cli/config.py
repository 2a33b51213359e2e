"""`nodmix config file|get|set|unset|validate|schema`."""

from __future__ import annotations

import argparse
import json
import sys

from nodmix.cli.common import common_parent, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `config` command group."""
    parser = sub.add_parser("config", help="read, change and validate nodmix.json")
    cmds = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    parent = common_parent()

    p = cmds.add_parser("file", parents=[parent], help="print the config file path")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_file)

    p = cmds.add_parser(
        "get", parents=[parent], help="print the effective value at a key path (or everything)"
    )
    p.add_argument(
        "key", nargs="?", help="dotted path, e.g. gateway.port; without it the whole config"
    )
    p.add_argument("--json", action="store_true", help="print JSON (no default markers)")
    p.add_argument("--show-secrets", action="store_true", help="do not redact keys and tokens")
    p.set_defaults(handler=_get)

    p = cmds.add_parser("set", parents=[parent], help="set the value at a key path")
    p.add_argument("key")
    p.add_argument("value", help="JSON5 value; plain text is accepted for string keys")
    p.add_argument("--strict-json", action="store_true", help="refuse values that are not JSON")
    p.add_argument("--dry-run", action="store_true", help="validate and print, do not write")
    p.set_defaults(handler=_set)

    p = cmds.add_parser("unset", parents=[parent], help="remove the value at a key path")
    p.add_argument("key")
    p.set_defaults(handler=_unset)

    p = cmds.add_parser("validate", parents=[parent], help="check the config file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_validate)

    p = cmds.add_parser("schema", parents=[parent], help="print the JSON Schema of nodmix.json")
    p.set_defaults(handler=_schema)


def _load_raw() -> tuple[object, dict[str, object]]:
    from nodmix.config.loader import load_config

    loaded = load_config()
    return loaded.path, loaded.raw


def _file(args: argparse.Namespace) -> int:
    from nodmix.config.loader import load_config

    loaded = load_config()
    if args.json:
        print_json({"path": str(loaded.path), "exists": loaded.exists})
    else:
        print(loaded.path)
    return 0


def _get(args: argparse.Namespace) -> int:
    from nodmix.config.edit import parse_key
    from nodmix.config.effective import (
        Marked,
        effective_tree,
        effective_value,
        plain,
        redact,
        render,
    )
    from nodmix.config.loader import load_config
    from nodmix.errors import ConfigError

    loaded = load_config()
    if args.key is None:
        value = effective_tree(loaded.config, loaded.raw)
    else:
        value = effective_value(loaded.config, loaded.raw, parse_key(args.key), args.key)
        if value is None:
            raise ConfigError(
                "not set in the file; where it is used, Nodmix picks its default (see the docs)",
                key=args.key,
            )
    if not args.show_secrets:
        field = parse_key(args.key)[-1] if args.key else ""
        value = redact(value, field=field if isinstance(field, str) else "")
    if args.json:
        print_json(plain(value))
    elif isinstance(value, Marked) and not isinstance(value.value, dict | list):
        shown = value.value
        print(f"{shown if isinstance(shown, str) else json.dumps(shown)} (default)")
    elif isinstance(value, str):
        print(value)
    else:
        print(render(value))
    return 0


def _set(args: argparse.Namespace) -> int:
    from nodmix.config.edit import parse_cli_value, parse_key, set_value, write_document
    from nodmix.config.keys import parse_value_for
    from nodmix.config.loader import load_config, validate

    loaded = load_config()
    if args.strict_json:
        value = parse_cli_value(args.value, strict_json=True)
    else:
        value = parse_value_for(args.key, parse_key(args.key), args.value)
    doc = set_value(loaded.raw, args.key, value)
    if args.dry_run:
        _missing_extras(validate(doc, file=str(loaded.path)), args.key)
        print_json(doc)
        return 0
    write_document(loaded.path, doc)
    print(f"set {args.key} in {loaded.path}")
    _missing_extras(validate(doc, file=str(loaded.path)), args.key)
    from nodmix.cli.config_notice import running_gateway_notice

    notice = running_gateway_notice(loaded.config, args.key)
    if notice:
        print(notice)
    return 0


def _missing_extras(config: object, key: str) -> None:
    """One line per optional part `key` turns on whose extra is not installed."""
    from nodmix.extras import hint, missing_under

    for row in missing_under(config, key):
        print(f"nodmix: note: {hint(row)}", file=sys.stderr)


def _unset(args: argparse.Namespace) -> int:
    from nodmix.config.edit import unset_value, write_document
    from nodmix.config.loader import load_config

    loaded = load_config()
    write_document(loaded.path, unset_value(loaded.raw, args.key))
    print(f"removed {args.key} from {loaded.path}")
    from nodmix.cli.config_notice import running_gateway_notice

    notice = running_gateway_notice(loaded.config, args.key)
    if notice:
        print(notice)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from nodmix.config.loader import load_config
    from nodmix.errors import ConfigError

    try:
        loaded = load_config()
    except ConfigError as exc:
        if args.json:
            print_json({"valid": False, "error": str(exc), "file": exc.file, "key": exc.key})
            return 1
        raise
    if args.json:
        print_json({"valid": True, "path": str(loaded.path), "exists": loaded.exists})
    else:
        state = "valid" if loaded.exists else "missing (defaults apply)"
        print(f"{loaded.path}: {state}")
    return 0


def _schema(args: argparse.Namespace) -> int:
    import msgspec

    from nodmix.config.schema import NodmixConfig

    schema = msgspec.json.schema(NodmixConfig)
    json.dump(schema, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
