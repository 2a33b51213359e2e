"""How the channel manager runs turns: `TurnRunner`, implemented by the gateway
(`gateway/channel_turns.py`) over the same turn path as WebSocket and HTTP turns; and
`ReplyHook`, what runs after a reply went out (spoken replies, `channels/voice.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from nodmix.channels.streaming import ReplyStream
from nodmix.channels.types import InboundMessage
from nodmix.media.files import InboundFile
from nodmix.origin import TurnOrigin


class RunHandle(Protocol):
    """A turn started for a channel message."""

    def cancel(self) -> None: ...

    async def result(self) -> str:
        """The text to send back (the reply, or a command's message)."""
        ...


class TurnRunner(Protocol):
    """How the manager runs turns: the gateway's turn API."""

    def start(
        self,
        text: str,
        *,
        agent_id: str,
        session_key: str,
        origin: TurnOrigin,
        stream: ReplyStream | None = None,
        files: Sequence[InboundFile] = (),
    ) -> RunHandle:
        """Start the turn (`files`: saved attachments, images and voice notes among them);
        its model text goes to `stream` as it arrives."""
        ...

    def workspace(self, agent_id: str) -> Path: ...

    def default_agent(self) -> str: ...


class ReplyHook(Protocol):
    """Runs after a turn's text reply was sent (failures are its own to report)."""

    async def after_reply(self, msg: InboundMessage, reply: str) -> None: ...
