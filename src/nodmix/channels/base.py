"""The channel adapter seam: one small protocol per platform.

An adapter owns its platform connection. `run(sink, status)` receives events until
cancelled, turning each into an `InboundMessage` handed to `sink` (awaited: the adapter
persists its position, such as the Telegram update offset, only after the sink accepted the
message). `send` delivers one outbound message whose text is already within `text_limit` (the
layer splits long replies).

Optional capabilities, each a one-method protocol an adapter may also implement:
`MessageEditor.edit_text` (replies streamed by editing the message, `streaming: "edit"`),
`WebhookReceiver.receive_webhook` (updates the platform posts to the gateway's own HTTP server)
and `WebhookVerifier.verify_webhook` (the platform's `GET` that proves the URL is ours).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import InboundMessage, OutboundMessage

InboundSink = Callable[[InboundMessage], Awaitable[None]]


class ChannelAdapter(Protocol):
    """A connected chat platform."""

    @property
    def channel_id(self) -> str:
        """The config id (`telegram`)."""
        ...

    @property
    def text_limit(self) -> int:
        """The longest text one message may carry."""
        ...

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Connect and deliver inbound messages until cancelled (reconnecting on errors with
        backoff), keeping `status` (connected, account, errors) current."""
        ...

    async def send(self, message: OutboundMessage) -> list[str]:
        """Send one message (text within `text_limit`, then its files); the sent message ids."""
        ...

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """Show the typing indicator for a few seconds."""
        ...

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """Save an inbound attachment to `target` (a path; the adapter may add an extension),
        never more than `max_bytes`.

        Raises:
            AttachmentTooLarge: the file is larger (known before or while downloading; a
                partial file is removed).
        """
        ...

    async def check(self) -> str:
        """Verify the credentials; a short description of the account (`@botname`)."""
        ...

    async def aclose(self) -> None:
        """Release the connection."""
        ...


@runtime_checkable
class MessageEditor(Protocol):
    """An adapter that can replace the text of a message it sent."""

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace the text of message `message_id` (text within `text_limit`).

        Raises:
            Exception: the platform refused the edit (too old, rate limited); the layer then
                sends the rest of the reply as new messages.
        """
        ...


@runtime_checkable
class WebhookReceiver(Protocol):
    """An adapter that receives updates as HTTP requests to the gateway."""

    async def receive_webhook(
        self, headers: Mapping[str, str], body: Callable[[], Awaitable[bytes]]
    ) -> int:
        """Check and hand on one posted update (to the sink `run` was given); the HTTP status
        to answer (200 accepted, 401 wrong secret, 400 malformed, 503 not running yet).
        `body` reads the request's body: only once the headers authenticate it, so a
        stranger's request is answered without waiting for (or buffering) its body."""
        ...


@runtime_checkable
class WebhookVerifier(Protocol):
    """An adapter whose platform verifies the webhook URL with a `GET` (WhatsApp's
    `hub.challenge`)."""

    def verify_webhook(self, query: Mapping[str, str]) -> tuple[int, str]:
        """The HTTP status and plain-text body for the verification request `query`."""
        ...


@runtime_checkable
class ChatAdmission(Protocol):
    """An adapter that records where chats are (`conversations.ChatAddresses`) and keeps the
    chats the access check let in apart from strangers'."""

    def admitted(self, chat_id: str, *, owner: bool) -> None:
        """The channel's access check let a message from `chat_id` in (`owner`: the owner's
        direct chat)."""
        ...
