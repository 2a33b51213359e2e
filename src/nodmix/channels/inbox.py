"""Inbound attachments: saved under the agent workspace's `inbox/` and named in the prompt.

The workspace is shared with sandboxed commands, which can leave `inbox` as a symlink to any
folder of the host. So a file is downloaded into a private temporary folder first and then
copied into `inbox/` through descriptors that never follow a symlink (`nodmix.tools.confined`):
a planted link makes the save fail, it never sends the file elsewhere.
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
from pathlib import Path, PurePath

from nodmix.channels.base import ChannelAdapter
from nodmix.channels.types import Attachment, InboundMessage
from nodmix.tools.confined import copy_into, open_folder

log = logging.getLogger("nodmix.channels")

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


async def prompt_text(adapter: ChannelAdapter, msg: InboundMessage, workspace: Path) -> str:
    """The user message a turn gets: the text (with the sender's name in groups) and the
    workspace paths of saved attachments (fetched through the `adapter` the message came
    from)."""
    text = msg.text
    if msg.chat_type == "group" and msg.sender_name:
        text = f"[{msg.sender_name}] {text}"
    notes = []
    for i, attachment in enumerate(msg.attachments):
        if attachment.ref is None:
            continue
        base = _SAFE.sub("_", attachment.name or attachment.kind)[:80] or attachment.kind
        message_id = _SAFE.sub("_", msg.message_id)[:80]
        name = f"{int(time.time())}-{message_id}-{i}-{base}"
        try:
            saved = await _save(adapter, attachment, workspace, name)
        except Exception as exc:
            log.warning("%s: cannot save attachment: %s", msg.channel, exc)
            notes.append(f"[{attachment.kind} attached, but it could not be saved: {exc}]")
            continue
        notes.append(f"[{attachment.kind} attached: {saved.relative_to(workspace)}]")
    return "\n".join(part for part in (text, *notes) if part)


async def _save(
    adapter: ChannelAdapter, attachment: Attachment, workspace: Path, name: str
) -> Path:
    assert attachment.ref is not None
    workspace.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nodmix-inbox-") as staging:
        fetched = await adapter.download(attachment.ref, Path(staging) / name)
        final = _SAFE.sub("_", fetched.name)
        with open_folder(workspace, PurePath("inbox"), create=True) as inbox:
            copy_into(fetched, inbox, final)
    return workspace / "inbox" / final
