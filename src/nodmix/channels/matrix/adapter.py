"""The Matrix adapter: long-polling `/sync`, joining invitations, sending text and files,
editing its messages (`m.replace`) for streamed replies.

The sync token is saved in the channel's delivery state after every message of a sync batch
was accepted, so a restart resumes where the last run stopped; the first start of a new
account skips the history it finds and answers only what arrives from then on. Invitations
are followed when `invite_allowed` says so (allowed senders; direct chats while pairing is
possible); others are left alone. End-to-end encrypted rooms cannot be read by this channel:
each one gets a one-line notice once, a warning in the log and a refusal in the status.
"""

from __future__ import annotations

import logging
import mimetypes
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
from aiohttp import ClientError, ClientTimeout
from nio import AsyncClient, AsyncClientConfig, InviteMemberEvent, MatrixRoom
from nio.responses import (
    ErrorResponse,
    JoinError,
    LoginResponse,
    ProfileGetDisplayNameResponse,
    RoomGetEventResponse,
    RoomSendResponse,
    SyncResponse,
    UploadResponse,
    WhoamiResponse,
)

from nodmix import offload
from nodmix.channels.attachments import check_declared, write_capped
from nodmix.channels.base import InboundSink
from nodmix.channels.delivery import open_delivery_log
from nodmix.channels.matrix.credentials import (
    MatrixSettings,
    StoredLogin,
    forget_login,
    load_login,
    matrix_settings,
    save_login,
)
from nodmix.channels.matrix.direct import DIRECT, DirectRooms
from nodmix.channels.matrix.mapping import (
    Me,
    edit_content,
    is_edit,
    is_encrypted,
    notice_content,
    sender_label,
    text_content,
    to_inbound,
)
from nodmix.channels.status import ChannelStatus
from nodmix.channels.types import OutboundMessage

__all__ = ["MatrixAdapter", "MatrixError", "matrix_settings"]

log = logging.getLogger("nodmix.channels.matrix")
# matrix-nio logs every error answer it cannot parse as a success (a refused token, say) as a
# warning of its own; this adapter reports those errors itself, once, in words for the user.
logging.getLogger("nio.responses").setLevel(logging.ERROR)

POLL_MS = 25_000
REQUEST_TIMEOUT_S = 60.0
MAX_BACKOFF_SECONDS = 60.0
DOWNLOAD_SECONDS = 300.0
SENT_KEPT = 500
ENCRYPTED_NOTICE = (
    "This room is end-to-end encrypted, which this assistant cannot read yet. "
    "Message it in an unencrypted room instead."
)
SYNC_FILTER: dict[str, Any] = {
    "presence": {"types": []},
    "account_data": {"types": [DIRECT]},
    "room": {"timeline": {"limit": 50}, "ephemeral": {"types": []}},
}
InviteCheck = Callable[[str, str, bool], bool]
"""`(sender_id, room_id, direct) -> accept`."""


class MatrixError(Exception):
    """The homeserver refused a request."""


def _check(response: Any, what: str) -> Any:
    if isinstance(response, ErrorResponse):
        code = f" ({response.status_code})" if response.status_code else ""
        raise MatrixError(f"{what}: {response.message}{code}")
    return response


class MatrixAdapter:
    """A Matrix account, as a `ChannelAdapter`."""

    def __init__(
        self,
        settings: MatrixSettings,
        state_dir: Path,
        invite_allowed: InviteCheck | None = None,
        groups: frozenset[str] = frozenset(),
    ) -> None:
        self.settings = settings
        self.channel_id = settings.channel
        self.text_limit = settings.text_limit
        self._state_dir = state_dir
        self._invite_allowed = invite_allowed or (lambda sender, room, direct: False)
        self.client = AsyncClient(
            settings.homeserver,
            settings.user_id,
            config=AsyncClientConfig(
                request_timeout=REQUEST_TIMEOUT_S, max_timeouts=1, max_limit_exceeded=3
            ),
        )
        self._position = open_delivery_log(state_dir, settings.channel)
        self._direct = DirectRooms(self.client, groups)
        self._ready = False
        self._me = Me(settings.user_id)
        self._sent: deque[str] = deque(maxlen=SENT_KEPT)
        self._warned_encrypted: set[str] = set()
        self._just_joined: set[str] = set()
        """Rooms joined since the last sync: their history from before the invitation is old."""

    # ---- connection -----------------------------------------------------------------------

    async def _connect(self) -> None:
        if self._ready:
            return
        settings = self.settings
        if settings.access_token:
            self.client.access_token = settings.access_token
        else:
            kept = load_login(self._state_dir, settings)
            if kept is not None:
                self.client.access_token, self.client.device_id = kept.access_token, kept.device_id
                whoami = await self.client.whoami()
                if not isinstance(whoami, WhoamiResponse):  # revoked: log in again
                    forget_login(self._state_dir, settings)
                    kept = None
            if kept is None:
                login = _check(
                    await self.client.login(settings.password, device_name=settings.device_name),
                    "login",
                )
                assert isinstance(login, LoginResponse)
                save_login(
                    self._state_dir,
                    settings,
                    StoredLogin(login.user_id, login.device_id, login.access_token),
                )
        whoami = _check(await self.client.whoami(), "access token")
        assert isinstance(whoami, WhoamiResponse)
        if whoami.user_id != settings.user_id:
            raise MatrixError(f"the token belongs to {whoami.user_id}, not {settings.user_id}")
        self.client.user_id = whoami.user_id
        if whoami.device_id:
            self.client.device_id = whoami.device_id
        names: tuple[str, ...] = (settings.user_id.split(":", 1)[0].lstrip("@"),)
        profile = await self.client.get_displayname(settings.user_id)
        if isinstance(profile, ProfileGetDisplayNameResponse) and profile.displayname:
            names = (profile.displayname, *names)
        self._me = Me(settings.user_id, names)
        await self._direct.fetch()
        self._ready = True

    async def check(self) -> str:
        """whoami (and a password login when no token is kept)."""
        await self._connect()
        return self.settings.user_id

    # ---- inbound --------------------------------------------------------------------------

    async def run(self, sink: InboundSink, status: ChannelStatus) -> None:
        """Sync until cancelled."""
        position = await offload.call(self._position, self._position.position)
        since = position.get("since")
        backoff = 1.0
        while True:
            try:
                await self._connect()
                if not status.connected:
                    status.connected = True
                    status.account = self.settings.user_id
                    log.info("matrix connected as %s", self.settings.user_id)
                response = _check(
                    await self.client.sync(
                        timeout=POLL_MS if since else 0, sync_filter=SYNC_FILTER, since=since
                    ),
                    "sync",
                )
                backoff = 1.0
            except (TimeoutError, MatrixError, ClientError, OSError) as exc:
                status.connected = False
                status.error(f"connection: {exc}")
                log.warning("matrix error: %s (retrying in %gs)", exc, backoff)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                continue
            assert isinstance(response, SyncResponse)
            for event in response.account_data_events:
                if getattr(event, "type", None) == DIRECT:
                    self._direct.load(getattr(event, "content", None) or {})
            await self._invites(response, status)
            if since is not None:  # the first sync of an account only sets the starting point
                await self._timeline(response, sink, status)
            if response.next_batch != since:
                since = response.next_batch
                saved = {"since": since}
                await offload.call(self._position, self._position.save_position, saved)

    async def _invites(self, response: SyncResponse, status: ChannelStatus) -> None:
        for room_id, info in response.rooms.invite.items():
            inviter, direct = None, False
            for event in info.invite_state:
                if (
                    isinstance(event, InviteMemberEvent)
                    and event.state_key == self.settings.user_id
                    and event.membership == "invite"
                ):
                    inviter = event.sender
                    direct = bool(event.content.get("is_direct"))
            if not isinstance(inviter, str) or not self._invite_allowed(inviter, room_id, direct):
                status.count("ignore", "invitation from a sender who is not allowed")
                log.info("matrix: left the invitation to %s from %s alone", room_id, inviter)
                continue
            try:
                joined = await self.client.join(room_id)
            except (TimeoutError, ClientError, OSError) as exc:
                status.error(f"joining {room_id}: {exc}")
                continue
            if isinstance(joined, JoinError):
                status.error(f"joining {room_id}: {joined.message}")
            else:
                log.info("matrix: joined %s, invited by %s", room_id, inviter)
                self._just_joined.add(room_id)
                if direct:  # recorded as every Matrix client records a direct chat
                    await self._direct.add(room_id, inviter)

    async def _timeline(
        self, response: SyncResponse, sink: InboundSink, status: ChannelStatus
    ) -> None:
        for room_id, info in response.rooms.join.items():
            room = self.client.rooms.get(room_id)
            events = list(info.timeline.events)
            if room_id in self._just_joined:
                self._just_joined.discard(room_id)
                events = events[self._invitation_index(events) + 1 :]
            for event in events:
                source: dict[str, Any] = getattr(event, "source", {}) or {}
                if source.get("sender") == self.settings.user_id:
                    continue
                if is_encrypted(source) or (room is not None and room.encrypted):
                    if source.get("type") in ("m.room.encrypted", "m.room.message"):
                        await self._refuse_encrypted(room_id, status)
                    continue
                if is_edit(source):  # an edit is not a new message (nor a new mention)
                    status.count("ignore", "edited message")
                    continue
                msg = await self._inbound(source, room_id, room)
                if msg is None:
                    continue
                try:
                    await sink(msg)
                except Exception as exc:  # one bad message must not stop the channel
                    status.error(f"handling message {msg.key}: {exc}")
                    log.exception("matrix: handling message %s failed", msg.key)

    def _invitation_index(self, events: list[Any]) -> int:
        """Where the bot's invitation is in a just-joined room's timeline (-1: not there, so
        everything shown came after it)."""
        for index in range(len(events) - 1, -1, -1):
            source = getattr(events[index], "source", {}) or {}
            if (
                source.get("type") == "m.room.member"
                and source.get("state_key") == self.settings.user_id
                and (source.get("content") or {}).get("membership") == "invite"
            ):
                return index
        return -1

    async def _inbound(self, source: dict[str, Any], room_id: str, room: MatrixRoom | None) -> Any:
        sender = str(source.get("sender", ""))
        if not self._direct.known(room_id):
            await self._direct.look_up(room_id)
        direct = self._direct.is_direct(room_id, sender)
        member = room.users.get(sender) if room is not None else None
        name = sender_label(sender, member.display_name if member is not None else None)
        replied_to_me = False
        reply = (source.get("content") or {}).get("m.relates_to", {})
        reply_id = (
            reply.get("m.in_reply_to", {}).get("event_id") if isinstance(reply, dict) else None
        )
        if isinstance(reply_id, str) and not direct:
            replied_to_me = await self._sent_by_me(room_id, reply_id)
        return to_inbound(
            source,
            channel=self.channel_id,
            room_id=room_id,
            direct=direct,
            me=self._me,
            sender_name=name,
            replied_to_me=replied_to_me,
        )

    async def _sent_by_me(self, room_id: str, event_id: str) -> bool:
        if event_id in self._sent:
            return True
        try:
            found = await self.client.room_get_event(room_id, event_id)
        except (TimeoutError, ClientError, OSError):
            return False
        if isinstance(found, RoomGetEventResponse):
            return bool(found.event.sender == self.settings.user_id)
        return False

    async def _refuse_encrypted(self, room_id: str, status: ChannelStatus) -> None:
        status.count("refuse", "end-to-end encrypted room")
        if room_id in self._warned_encrypted:
            return
        self._warned_encrypted.add(room_id)
        log.warning("matrix: %s is end-to-end encrypted; its messages are refused", room_id)
        try:
            await self._send_content(room_id, notice_content(ENCRYPTED_NOTICE))
        except (TimeoutError, MatrixError, ClientError, OSError) as exc:
            status.error(f"notice to {room_id}: {exc}")

    # ---- outbound -------------------------------------------------------------------------

    async def _send_content(self, room_id: str, content: dict[str, Any]) -> str:
        await self._connect()
        if room_id.startswith("@"):  # a person: their direct chat with the assistant
            found = self._direct.room_with(room_id)
            if found is None:
                raise MatrixError(f"no direct chat with {room_id} yet: they must invite the bot")
            room_id = found
        sent = _check(
            await self.client.room_send(
                room_id, "m.room.message", content, ignore_unverified_devices=True
            ),
            "send",
        )
        assert isinstance(sent, RoomSendResponse)
        self._sent.append(sent.event_id)
        return str(sent.event_id)

    async def send(self, message: OutboundMessage) -> list[str]:
        """The text as an `m.text` (in the message's thread), then one `m.file` per file."""
        ids: list[str] = []
        if message.text:
            content = text_content(
                message.text, thread_id=message.thread_id, reply_to=message.reply_to
            )
            ids.append(await self._send_content(message.chat_id, content))
        for attachment in message.attachments:
            if attachment.path is not None:
                sent = await self._send_file(
                    message.chat_id, attachment.path, attachment.name, attachment.data
                )
                ids.append(sent)
        return ids

    async def edit_text(self, chat_id: str, message_id: str, text: str) -> None:
        """An `m.replace` edit of the message (streamed replies)."""
        await self._send_content(chat_id, edit_content(text, message_id))

    async def _send_file(
        self, room_id: str, path: Path, name: str | None, data: bytes | None = None
    ) -> str:
        filename = name or path.name
        mime = mimetypes.guess_type(filename)[0] or "application/octet-stream"
        if data is None:
            data = path.read_bytes()
        uploaded, _ = await self.client.upload(
            lambda *_: data, content_type=mime, filename=filename, filesize=len(data)
        )
        _check(uploaded, "upload")
        assert isinstance(uploaded, UploadResponse)
        image = mime.startswith("image/")
        content = {
            "msgtype": "m.image" if image else "m.file",
            "body": filename,
            "url": uploaded.content_uri,
            "info": {"mimetype": mime, "size": len(data)},
        }
        return await self._send_content(room_id, content)

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        """The typing notification, for a little longer than the layer's refresh interval."""
        await self.client.room_typing(chat_id, True, timeout=6000)

    async def download(self, ref: str, target: Path, *, max_bytes: int) -> Path:
        """Fetch an `mxc://` media file, streamed under the cap (the declared length is
        checked first)."""
        await self._connect()
        server, _, media_id = ref.removeprefix("mxc://").partition("/")
        if not server or not media_id or "/" in media_id or ".." in ref:
            raise MatrixError(f"not a media URI: {ref}")
        path = f"/_matrix/client/v1/media/download/{quote(server)}/{quote(media_id)}"
        headers = {"Authorization": f"Bearer {self.client.access_token}"}
        timeout = ClientTimeout(sock_connect=10, sock_read=REQUEST_TIMEOUT_S)
        with anyio.fail_after(DOWNLOAD_SECONDS):
            response = await self.client.send("GET", path, None, headers, timeout=timeout)
            try:
                if response.status != 200:
                    raise MatrixError(f"download {ref}: HTTP {response.status}")
                check_declared(response.content_length, max_bytes)
                suffix = mimetypes.guess_extension(response.content_type or "") or ""
                if suffix and not target.suffix:
                    target = target.with_suffix(suffix)
                await write_capped(response.content.iter_chunked(65536), target, max_bytes)
            finally:
                response.release()
        return target

    async def aclose(self) -> None:
        """Close the HTTP session."""
        self._ready = False
        await self.client.close()
