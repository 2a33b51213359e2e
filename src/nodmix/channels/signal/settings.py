"""`channels.signal` resolved: the transport, its deadlines and size limits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nodmix.config.channel_phone import SignalConfig

DEFAULT_TIMEOUT_SECONDS = 30.0
MIN_MESSAGE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SignalSettings:
    """Resolved `channels.signal`."""

    account: str
    http_url: str | None = None
    socket_path: str | None = None
    attachments_dir: Path | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_message_bytes: int = MIN_MESSAGE_BYTES
    """The largest answer or line accepted from the daemon (room for an attachment of the
    channel's `maxAttachmentBytes`, base64-encoded, fetched with `getAttachment`)."""
    channel: str = "signal"

    @property
    def where(self) -> str:
        """The daemon's address, for messages."""
        return self.http_url or f"unix:{self.socket_path}"


def signal_settings(section: SignalConfig, *, max_attachment_bytes: int) -> SignalSettings:
    """The settings of `section`; answers may hold an attachment of `max_attachment_bytes`."""
    room = max_attachment_bytes * 4 // 3 + 64 * 1024
    folder = section.attachments_dir
    return SignalSettings(
        account=section.account,
        http_url=section.http_url.rstrip("/") if section.http_url else None,
        socket_path=section.socket_path,
        attachments_dir=Path(folder).expanduser() if folder else None,
        timeout_seconds=section.request_timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
        max_message_bytes=max(MIN_MESSAGE_BYTES, room),
    )
