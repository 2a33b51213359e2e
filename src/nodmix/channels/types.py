"""The channel layer's own message types: what arrives from a chat and what goes back."""

from __future__ import annotations

from pathlib import Path

import msgspec

from nodmix.origin import ChatType, TurnOrigin


class Attachment(msgspec.Struct, frozen=True, kw_only=True):
    """A file that came with a message (`ref` is the platform's handle) or goes out with one."""

    kind: str
    """`photo`, `voice`, `audio`, `document`, ... (outbound `voice`: sent as a voice message
    where the platform has them)."""
    ref: str | None = None
    """The platform's file id (inbound)."""
    name: str | None = None
    size: int | None = None
    """The size the platform declares (inbound; checked against the cap before download)."""
    mime_type: str | None = None
    """The type the platform declares (a hint: the content decides)."""
    path: Path | None = None
    """Where the file is on disk (saved inbound files, outbound files)."""
    data: bytes | None = None
    """The outbound file's bytes, read when the path was checked (adapters send these rather
    than reading `path` again, which a process sharing the workspace could have swapped)."""


class InboundMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message from a chat, normalised by the adapter."""

    channel: str
    account: str = "default"
    chat_type: ChatType
    chat_id: str
    message_id: str
    sender_id: str
    sender_name: str = ""
    sender_mask: str | None = None
    """A longer form of the sender that `allowFrom` patterns may match (IRC `nick!user@host`,
    an email address); `sender_id` is matched exactly."""
    text: str = ""
    thread_id: str | None = None
    attachments: tuple[Attachment, ...] = ()
    mentioned: bool = False
    """The bot was @-mentioned (or the message replies to one of the bot's)."""
    reply_to: str | None = None
    """The message id this one replies to."""

    @property
    def key(self) -> str:
        """A delivery id unique within the channel (dedupe across restarts)."""
        return f"{self.chat_id}:{self.message_id}"

    def origin(self, *, owner: bool = False, memory: bool = False) -> TurnOrigin:
        """The turn origin this message gives a turn (`owner`: the sender is the channel's
        owner; `memory`: `memory.shareWith` names this chat)."""
        return TurnOrigin(
            channel=self.channel,
            account=self.account,
            chat_id=self.chat_id,
            chat_type=self.chat_type,
            thread_id=self.thread_id,
            sender_id=self.sender_id,
            sender_name=self.sender_name or None,
            message_id=self.message_id,
            owner=owner,
            memory=memory,
        )


class OutboundMessage(msgspec.Struct, frozen=True, kw_only=True):
    """Text (already within the platform's limit) and files for one chat."""

    chat_id: str
    text: str = ""
    thread_id: str | None = None
    reply_to: str | None = None
    attachments: tuple[Attachment, ...] = ()
