"""`nodmix message send --channel telegram --to CHAT "text"`: message a chat from the shell,
under the same allowlists as the agent's `message` tool."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from nodmix.cli.common import common_parent


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `message` command group."""
    parent = common_parent()
    p = sub.add_parser("message", parents=[parent], help="send a message to a chat channel")
    cmds = p.add_subparsers(dest="message_command", metavar="ACTION", required=True)
    q = cmds.add_parser("send", parents=[parent], help="send text (and files) to a chat")
    q.add_argument(
        "--channel",
        required=True,
        help="channel id (telegram, slack, msteams, googlechat, xmpp, mattermost, ...)",
    )
    q.add_argument("--to", required=True, help="chat id")
    q.add_argument("--file", action="append", default=[], help="a file to attach (repeatable)")
    q.add_argument("text", nargs="?", default="", help="the message text")
    q.set_defaults(handler=_send)


def _send(args: argparse.Namespace) -> int:
    import anyio

    from nodmix.channels.manager import ChannelManager
    from nodmix.channels.types import Attachment, OutboundMessage
    from nodmix.config import paths
    from nodmix.config.loader import load_config
    from nodmix.errors import NodmixError

    env = dict(os.environ)
    config = load_config(env=env).config
    manager = ChannelManager(lambda: config, env=env, state_dir=paths.state_dir(env))
    refused = manager.deliver_refusal(args.channel, args.to, None)
    if refused is not None:
        raise NodmixError(refused)
    files = []
    for name in args.file:
        path = Path(name)
        if not path.is_file():
            raise NodmixError(f"{name}: no such file")
        files.append(Attachment(kind="document", name=path.name, path=path.resolve()))
    if not args.text.strip() and not files:
        raise NodmixError("nothing to send: give the text or --file")
    message = OutboundMessage(chat_id=args.to, text=args.text, attachments=tuple(files))

    async def send() -> list[str]:
        try:
            return await manager.send(args.channel, message)
        finally:
            for adapter in manager.adapters.values():
                await adapter.aclose()

    try:
        ids = anyio.run(send)
    except NodmixError:
        raise
    except Exception as exc:  # the platform refused it: one line, the details with --verbose
        raise NodmixError(f"{args.channel}: not sent to {args.to}: {exc}") from exc
    print(f"Sent {len(ids)} message(s) to {args.channel} {args.to}.")
    return 0
