"""Inbound attachments: saved under the agent workspace's `inbox/` and named in the prompt."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from nodmix.channels.types import InboundMessage

if TYPE_CHECKING:
    from nodmix.channels.manager import ChannelManager

log = logging.getLogger("nodmix.channels")

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


async def prompt_text(manager: ChannelManager, msg: InboundMessage, workspace: Path) -> str:
    """The user message a turn gets: the text (with the sender's name in groups) and the
    workspace paths of saved attachments."""
    text = msg.text
    if msg.chat_type == "group" and msg.sender_name:
        text = f"[{msg.sender_name}] {text}"
    notes = []
    for i, attachment in enumerate(msg.attachments):
        if attachment.ref is None:
            continue
        base = _SAFE.sub("_", attachment.name or attachment.kind)[:80] or attachment.kind
        target = workspace / "inbox" / f"{int(time.time())}-{msg.message_id}-{i}-{base}"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            saved = await manager.adapter(msg.channel).download(attachment.ref, target)
        except Exception as exc:
            log.warning("%s: cannot save attachment: %s", msg.channel, exc)
            notes.append(f"[{attachment.kind} attached, but it could not be saved: {exc}]")
            continue
        notes.append(f"[{attachment.kind} attached: {saved.relative_to(workspace)}]")
    return "\n".join(part for part in (text, *notes) if part)
