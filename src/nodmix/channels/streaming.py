"""Replies streamed by editing the message (`channels.<id>.streaming: "edit"`).

While the model streams, the first words go out as a message at once and that message is
edited as the text grows: at most one edit (or further message) per `EDIT_EVERY_SECONDS` per
chat, and only when the text changed. Text past the platform's limit continues in a new
message, cut by the layer's chunking (`chunking.split_text`, which never leaves a code fence
broken). Each model step starts the text afresh (the words before a tool call are replaced by
the answer after it), so the last edit shows exactly the turn's reply, split as a reply
delivered at the end would be.

If an edit fails (the message is too old to edit, the platform asks to slow down), editing
stops and the rest of the reply is sent as new messages when the turn ends. A message sent
while streaming is waited for when the turn ends (its id must not be lost), but for at most
`SEND_WAIT_SECONDS`: past that (flood control retrying) streaming stops the same way.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import anyio

from nodmix.channels.base import ChannelAdapter, MessageEditor
from nodmix.channels.chunking import open_fence, split_text
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage

log = logging.getLogger("nodmix.channels")

EDIT_EVERY_SECONDS = 1.0
"""The shortest time between two edits (or further messages of a streamed reply) in a chat."""
SEND_WAIT_SECONDS = 30.0
"""How long sending one message of a streamed reply may hold up the end of the turn (the send
finishes even when the turn ends, so its message id is not lost). A send the platform keeps
refusing ("retry after") is given up then, and the reply is delivered when the turn ends."""
_THROTTLE_KEPT = 256


class ReplyStream(Protocol):
    """Where a turn's model text goes while it streams (called from the turn's event sink:
    must not block)."""

    def text(self, delta: str) -> None:
        """More text from the model."""
        ...

    def step_end(self) -> None:
        """A model step ended (tool calls may follow)."""
        ...


def edit_stream(
    adapter: ChannelAdapter | None,
    throttle: EditThrottle,
    status: ChannelStatus,
    chat_id: str,
    thread_id: str | None,
) -> EditStream | None:
    """A stream for a reply to `chat_id`, or None when the adapter cannot edit messages (the
    reply then goes out when the turn ends)."""
    if adapter is None or not isinstance(adapter, MessageEditor):
        return None
    return EditStream(adapter, adapter, throttle, status, chat_id=chat_id, thread_id=thread_id)


class EditThrottle:
    """When each chat was last edited (shared by every stream of a channel manager)."""

    def __init__(self, every_seconds: float = EDIT_EVERY_SECONDS) -> None:
        self.every_seconds = every_seconds
        self._last: dict[tuple[str, str], float] = {}

    async def wait(self, chat: tuple[str, str]) -> None:
        """Sleep until `chat` may be edited again."""
        last = self._last.get(chat)
        if last is not None:
            remaining = last + self.every_seconds - time.monotonic()
            if remaining > 0:
                await anyio.sleep(remaining)

    def mark(self, chat: tuple[str, str]) -> None:
        """`chat` was just edited."""
        now = time.monotonic()
        if len(self._last) >= _THROTTLE_KEPT:
            self._last = {k: t for k, t in self._last.items() if now - t < self.every_seconds}
        self._last[chat] = now


class EditStream:
    """One reply streamed into a chat; `text`/`step_end` take the model's output (called by
    the turn's event sink, so they never block), `run` shows it, `complete` delivers the
    reply when the turn ends."""

    def __init__(
        self,
        adapter: ChannelAdapter,
        editor: MessageEditor,
        throttle: EditThrottle,
        status: ChannelStatus,
        *,
        chat_id: str,
        thread_id: str | None,
        send_wait_seconds: float = SEND_WAIT_SECONDS,
    ) -> None:
        self._adapter = adapter
        self._send_wait = send_wait_seconds
        self._status = status
        self._editor = editor
        self._throttle = throttle
        self._chat = (adapter.channel_id, chat_id)
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._parts: list[str] = []
        """The step's text so far, as deltas: joined when read, so that a reply arriving in
        many small deltas costs linear time (appending to one string copied it each time)."""
        self._new_step = False
        self._shown: list[tuple[str, str]] = []
        """(message id, text) of each message showing the reply so far."""
        self._failed = False
        self._changed = anyio.Event()

    # ---- the turn's side --------------------------------------------------------------------

    def text(self, delta: str) -> None:
        """More text from the model."""
        if self._new_step:
            self._parts.clear()
            self._new_step = False
        self._parts.append(delta)
        self._changed.set()

    def step_end(self) -> None:
        """A model step ended; text that follows starts the reply afresh."""
        self._new_step = True

    # ---- the chat's side --------------------------------------------------------------------

    @property
    def streamed(self) -> str:
        """The text streamed so far (what a failed turn leaves in the chat)."""
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    async def run(self) -> None:
        """Show the growing text until cancelled (or until an edit fails)."""
        while not self._failed:
            await self._changed.wait()
            self._changed = anyio.Event()
            if self._shown:
                await self._throttle.wait(self._chat)
            try:
                await self._show(self._pieces(self.streamed))
            except Exception as exc:
                self._give_up(exc)

    async def complete(self, reply: str, *, failed: bool) -> bool:
        """End of the turn: True when the chat now shows `reply`; False when the caller must
        still send it (nothing streamed, or the turn failed: what streamed stays and the
        caller sends the error after it)."""
        try:
            done = await self.finish(self.streamed if failed else reply)
        except Exception as exc:
            self._status.error(f"send failed: {exc}")
            log.warning("%s: cannot send to %s: %s", *self._chat, exc)
            return not failed
        return done and not failed

    async def finish(self, reply: str) -> bool:
        """Make the chat show `reply` in full; False when nothing was streamed yet (the caller
        sends the reply the usual way)."""
        if not self._shown:
            return False
        pieces = self._pieces(reply)
        if not self._failed:
            await self._throttle.wait(self._chat)
            try:
                await self._show(pieces)
                return True
            except Exception as exc:
                self._give_up(exc)
        await self._send_rest(pieces)
        return True

    def _pieces(self, text: str) -> list[str]:
        return split_text(text, self._adapter.text_limit) if text.strip() else []

    def _give_up(self, exc: Exception) -> None:
        self._failed = True
        log.info("%s: cannot edit in %s (%s); the rest goes as new messages", *self._chat, exc)

    async def _show(self, pieces: list[str]) -> None:
        for i, piece in enumerate(pieces):
            if i >= len(self._shown):
                if self._shown:  # the first words go at once; later messages keep the pace
                    await self._throttle.wait(self._chat)
                # The turn ending must not lose its id, but must not wait on flood control.
                with anyio.move_on_after(self._send_wait, shield=True) as sending:
                    ids = await self._adapter.send(self._message(piece))
                if sending.cancelled_caught:
                    raise TimeoutError(f"sending took longer than {self._send_wait:g} s")
                self._throttle.mark(self._chat)  # a new message counts as an update too
                self._shown.append((ids[0] if ids else "", piece))
                continue
            message_id, shown = self._shown[i]
            if shown == piece or not message_id:
                continue
            await self._throttle.wait(self._chat)
            with anyio.CancelScope(shield=True):
                await self._editor.edit_text(self._chat_id, message_id, piece)
            self._throttle.mark(self._chat)
            self._shown[i] = (message_id, piece)

    async def _send_rest(self, pieces: list[str]) -> None:
        """After a failed edit: send what the chat does not show yet as new messages."""
        first = 0
        while first < min(len(pieces), len(self._shown)) and self._shown[first][1] == pieces[first]:
            first += 1
        if first == len(pieces):
            return
        rest = pieces[first:]
        if first < len(self._shown):
            shown = self._shown[first][1]
            piece = pieces[first]
            if piece.startswith(shown):  # continue the cut-off message where it stopped
                fence = open_fence(shown)
                reopen = f"{fence[0]}{fence[1]}\n" if fence is not None else ""
                tail = piece[len(shown) :].lstrip(" ").lstrip("\n")
                rest = [*self._pieces(reopen + tail), *pieces[first + 1 :]] if tail else rest[1:]
        for piece in rest:
            await self._adapter.send(self._message(piece))

    def _message(self, text: str) -> OutboundMessage:
        return OutboundMessage(chat_id=self._chat_id, text=text, thread_id=self._thread_id)
