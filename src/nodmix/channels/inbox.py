"""Inbound attachments: saved under the agent workspace's `inbox/`, then handed to the turn.

The workspace is shared with sandboxed commands, which can leave `inbox` as a symlink to any
folder of the host. So a file is downloaded into a private temporary folder first and then
copied into `inbox/` through descriptors that never follow a symlink (`nodmix.media.files`):
a planted link makes the save fail, it never sends the file elsewhere.

Files larger than the channel's `maxAttachmentBytes` are refused before anything is saved
(`attachments.py`); the message then gets that one line as its reply instead of a turn.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio

from nodmix.channels.attachments import (
    AttachmentTooLarge,
    check_declared,
    max_attachment_bytes,
    too_large_reply,
)
from nodmix.channels.base import ChannelAdapter
from nodmix.channels.types import Attachment, InboundMessage
from nodmix.config.schema import NodmixConfig
from nodmix.media.files import InboundFile, inbox_name, safe_name, save_copy

log = logging.getLogger("nodmix.channels")


@dataclass(frozen=True, slots=True)
class SavedMessage:
    """A message with its attachments saved: what its turn gets, or why it gets none."""

    text: str
    files: tuple[InboundFile, ...] = ()
    refusal: str | None = None
    """Set when the message is answered with this line instead of a turn."""


async def save_message(
    adapter: ChannelAdapter, msg: InboundMessage, workspace: Path, config: NodmixConfig
) -> SavedMessage:
    """The turn's text (with the sender's name in groups) and the saved attachments (fetched
    through the `adapter` the message came from)."""
    text = msg.text
    if msg.chat_type == "group" and msg.sender_name:
        text = f"[{msg.sender_name}] {text}"
    limit = max_attachment_bytes(config, msg.channel)
    notes: list[str] = []
    files: list[InboundFile] = []
    for i, attachment in enumerate(msg.attachments):
        try:
            check_declared(attachment.size, limit)
        except AttachmentTooLarge as exc:
            return SavedMessage(text, refusal=too_large_reply(attachment.kind, limit, exc.size))
        if attachment.ref is None:
            continue
        name = inbox_name(attachment.name or attachment.kind, f"{msg.message_id}-{i}")
        try:
            saved = await _save(adapter, attachment, workspace, name, limit)
        except AttachmentTooLarge as exc:
            return SavedMessage(text, refusal=too_large_reply(attachment.kind, limit, exc.size))
        except Exception as exc:
            log.warning("%s: cannot save attachment: %s", msg.channel, exc)
            notes.append(f"[{attachment.kind} attached, but it could not be saved: {exc}]")
            continue
        files.append(
            InboundFile(
                path=saved,
                kind=attachment.kind,
                name=attachment.name,
                mime_type=attachment.mime_type,
            )
        )
    return SavedMessage("\n".join(part for part in (text, *notes) if part), tuple(files))


async def _save(
    adapter: ChannelAdapter,
    attachment: Attachment,
    workspace: Path,
    name: str,
    limit: int,
) -> str:
    assert attachment.ref is not None
    with tempfile.TemporaryDirectory(prefix="nodmix-inbox-") as staging:
        target = Path(staging) / name
        fetched = await adapter.download(attachment.ref, target, max_bytes=limit)
        size = fetched.stat().st_size
        if size > limit:  # an adapter that could only check afterwards
            raise AttachmentTooLarge(limit, size)
        return await anyio.to_thread.run_sync(
            save_copy, workspace, fetched, safe_name(fetched.name, limit=160)
        )
