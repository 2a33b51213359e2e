"""`nodmix channels list|status`: configured channels and what the gateway sees of them."""

from __future__ import annotations

import argparse
import os
from datetime import datetime
from typing import Any

from nodmix.cli.common import common_parent, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `channels` command group."""
    parent = common_parent()
    p = sub.add_parser("channels", parents=[parent], help="chat channels (Telegram)")
    cmds = p.add_subparsers(dest="channels_command", metavar="ACTION", required=True)
    for name, help_text in (
        ("list", "configured channels and their access rules"),
        ("status", "connection, last event, errors and refused counts (from the gateway)"),
    ):
        q = cmds.add_parser(name, parents=[parent], help=help_text)
        q.add_argument("--json", action="store_true", help="machine-readable output")
        q.set_defaults(handler=_list if name == "list" else _status)


def _config() -> tuple[Any, Any]:
    from nodmix.config import paths
    from nodmix.config.loader import load_config

    env = dict(os.environ)
    return load_config(env=env).config, paths.state_dir(env)


def _list(args: argparse.Namespace) -> int:
    from nodmix.channels.registry import KNOWN_CHANNELS, channel_section, rules_for

    config, _ = _config()
    rows: list[dict[str, Any]] = []
    for channel in KNOWN_CHANNELS:
        section = channel_section(config, channel)
        if section is None:
            continue
        rules = rules_for(config, channel)
        rows.append(
            {
                "channel": channel,
                "enabled": bool(getattr(section, "enabled", True)),
                "dmPolicy": rules.dm_policy,
                "groupPolicy": rules.group_policy,
                "allowFrom": sorted(rules.allow_from),
                "groups": sorted(rules.groups),
                "requireMention": rules.require_mention,
            }
        )
    if args.json:
        print_json({"channels": rows})
        return 0
    if not rows:
        print(
            "No channels configured "
            "(add a channels.telegram or channels.matrix section to nodmix.json)."
        )
    for row in rows:
        state = "enabled" if row["enabled"] else "disabled"
        mention = "yes" if row["requireMention"] else "no"
        print(
            f"{row['channel']}  {state}  dm: {row['dmPolicy']}  groups: {row['groupPolicy']} "
            f"({len(row['groups'])} listed)  mention required: {mention}"
        )
    return 0


def _when(value: Any) -> str:
    if not isinstance(value, int | float):
        return "never"
    return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def _not_running(config: Any) -> str:
    """Why no gateway runs the channels: none is running, or one started without them."""
    from nodmix.cli.config_notice import answering_gateway
    from nodmix.invocation import nodmix_command

    url = answering_gateway(config)
    if url is not None:
        return (
            f"The gateway at {url} was started before these channels were configured (restart it)"
        )
    return f"The gateway is not running (start it with `{nodmix_command()} gateway`)"


def _status(args: argparse.Namespace) -> int:
    from nodmix.channels.registry import enabled_channels
    from nodmix.channels.status import read_status

    config, state_dir = _config()
    running, rows = read_status(state_dir)
    by_channel = {row.get("channel"): row for row in rows}
    configured = enabled_channels(config)
    if args.json:
        print_json(
            {
                "gatewayRunning": running,
                "channels": [
                    by_channel.get(c, {"channel": c, "connected": False}) for c in configured
                ],
            }
        )
        return 0
    if not configured:
        print("No channels configured.")
        return 0
    if not running:
        print(_not_running(config) + "; last known state:")
    for channel in configured:
        row = by_channel.get(channel, {})
        connected = "connected" if running and row.get("connected") else "not connected"
        account = f" as {row['account']}" if row.get("account") else ""
        print(f"{channel}: {connected}{account}")
        print(f"  last event: {_when(row.get('lastEventAt'))}")
        print(
            f"  received {row.get('received', 0)}, answered {row.get('answered', 0)}, "
            f"refused {row.get('refused', 0)}, ignored {row.get('ignored', 0)}, "
            f"pairing requests {row.get('pairingRequests', 0)}, errors {row.get('errors', 0)}"
        )
        if row.get("lastError"):
            print(f"  last error: {row['lastError']} ({_when(row.get('lastErrorAt'))})")
    return 0
