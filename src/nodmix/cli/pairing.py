"""`nodmix pairing list|approve|revoke`: let chat senders reach the agent."""

from __future__ import annotations

import argparse
import os
from datetime import datetime

from nodmix.cli.common import common_parent, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `pairing` command group."""
    parent = common_parent()
    p = sub.add_parser("pairing", parents=[parent], help="approve chat senders (pairing codes)")
    cmds = p.add_subparsers(dest="pairing_command", metavar="ACTION", required=True)

    q = cmds.add_parser("list", parents=[parent], help="pending pairing requests and approved")
    q.add_argument("channel", nargs="?", help="one channel (default: all)")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(handler=_list)

    q = cmds.add_parser("approve", parents=[parent], help="approve a sender's pairing code")
    q.add_argument("channel")
    q.add_argument("code")
    q.add_argument(
        "--owner",
        action="store_true",
        help="the sender is you: add them to channels.<channel>.ownerIds (their DMs continue "
        "your main session, and only owners answer exec approvals)",
    )
    q.set_defaults(handler=_approve)

    q = cmds.add_parser("revoke", parents=[parent], help="forget an approved sender")
    q.add_argument("channel")
    q.add_argument("sender", help="the sender id")
    q.set_defaults(handler=_revoke)


def _store() -> tuple[object, list[str]]:
    from nodmix.channels.pairing import open_pairing_store
    from nodmix.channels.registry import enabled_channels
    from nodmix.config import paths
    from nodmix.config.loader import load_config

    env = dict(os.environ)
    store = open_pairing_store(paths.state_dir(env))
    configured = enabled_channels(load_config(env=env).config)
    return store, sorted(set(configured) | set(store.channels()))


def _list(args: argparse.Namespace) -> int:
    from nodmix.channels.pairing import PairingStore

    store, channels = _store()
    assert isinstance(store, PairingStore)
    if args.channel:
        channels = [args.channel]
    pending = [p.to_json(c) for c in channels for p in store.load(c).pending]
    approved = [
        {"channel": c, "senderId": a.sender_id, "senderName": a.sender_name}
        for c in channels
        for a in store.load(c).approved
    ]
    if args.json:
        print_json({"pending": pending, "approved": approved})
        return 0
    if not pending:
        print("No pending pairing requests.")
    for row in pending:
        expires = datetime.fromtimestamp(row["expiresAt"] / 1000).strftime("%H:%M")
        name = f" ({row['senderName']})" if row["senderName"] else ""
        print(f"{row['channel']}  {row['code']}  sender {row['senderId']}{name}  expires {expires}")
    for row in approved:
        name = f" ({row['senderName']})" if row["senderName"] else ""
        print(f"{row['channel']}  approved  sender {row['senderId']}{name}")
    return 0


def _known(channel: str, channels: list[str]) -> None:
    """Refuse a channel that is neither configured nor has pairing records (a typo)."""
    from nodmix.channels.pairing import PairingError

    if channel not in channels:
        known = ", ".join(channels) or "none configured"
        raise PairingError(f"no channel {channel!r} (channels: {known})")


def _approve(args: argparse.Namespace) -> int:
    from nodmix.channels.pairing import PairingStore

    store, channels = _store()
    assert isinstance(store, PairingStore)
    _known(args.channel, channels)
    if args.owner:
        _owner_section(args.channel)  # before the code is used up
    found = store.approve(args.channel, args.code)
    name = f" ({found.sender_name})" if found.sender_name else ""
    print(f"Approved {args.channel} sender {found.sender_id}{name}.")
    if args.owner:
        from nodmix.cli.config_notice import running_gateway_notice
        from nodmix.config.loader import load_config

        before = load_config().config
        add_owner(args.channel, found.sender_id)
        print(
            f"{found.sender_id} is an owner of {args.channel} (channels.{args.channel}.ownerIds):"
            " their DMs continue your main session and they answer exec approvals."
        )
        notice = running_gateway_notice(before, f"channels.{args.channel}.ownerIds")
        if notice:
            print(notice)
    return 0


def _owner_section(channel: str) -> None:
    """Refuse `--owner` for a channel without a section in the config file."""
    from nodmix.config.loader import load_config
    from nodmix.errors import ConfigError

    loaded = load_config()
    channels = loaded.raw.get("channels")
    if not isinstance(channels, dict) or not isinstance(channels.get(channel), dict):
        raise ConfigError(
            f"--owner: {channel} has no section in the config, so there is nowhere to record "
            "the owner",
            file=str(loaded.path),
            key=f"channels.{channel}",
        )


def add_owner(channel: str, sender_id: str) -> None:
    """Add `sender_id` to `channels.<channel>.ownerIds` in the config file (kept once)."""
    from nodmix.config.edit import set_value, write_document
    from nodmix.config.loader import load_config

    _owner_section(channel)
    loaded = load_config()
    section = loaded.raw["channels"][channel]
    owners = [str(o) for o in section.get("ownerIds") or []]
    if sender_id not in owners:
        doc = set_value(loaded.raw, f"channels.{channel}.ownerIds", [*owners, sender_id])
        write_document(loaded.path, doc)


def _revoke(args: argparse.Namespace) -> int:
    from nodmix.channels.pairing import PairingStore

    store, channels = _store()
    assert isinstance(store, PairingStore)
    _known(args.channel, channels)
    store.revoke(args.channel, args.sender)
    print(f"Revoked {args.channel} sender {args.sender}; they must pair again.")
    return 0
