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
    found = store.approve(args.channel, args.code)
    name = f" ({found.sender_name})" if found.sender_name else ""
    print(f"Approved {args.channel} sender {found.sender_id}{name}.")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from nodmix.channels.pairing import PairingStore

    store, channels = _store()
    assert isinstance(store, PairingStore)
    _known(args.channel, channels)
    store.revoke(args.channel, args.sender)
    print(f"Revoked {args.channel} sender {args.sender}; they must pair again.")
    return 0
