"""Replies spoken aloud (`messages.tts`) and `/tts on|off` per chat.

After a channel turn's text reply went out, `VoiceReplies.after_reply` decides whether to
speak it too: the chat's `/tts` setting wins, else `messages.tts.auto` (`always`, or
`inbound`: only replies to a voice note or audio file). Replies longer than `maxChars` stay
text only. The speech comes from the provider's `/audio/speech`; where the platform has voice
messages (Telegram's `sendVoice`), it is converted to OGG/Opus with ffmpeg, elsewhere it goes
as an audio file. A failure never touches the text reply that already went out: it is
logged and shown in the channel's status (with the one-line hint when ffmpeg is missing, and
the reply then goes as a plain audio file where the platform needs OGG/Opus for voice).
"""

from __future__ import annotations

import logging
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nodmix.channels.commands import ChatCommand, CommandCall, register_command
from nodmix.channels.types import Attachment, InboundMessage, OutboundMessage
from nodmix.media.convert import to_ogg_opus
from nodmix.media.errors import MediaError
from nodmix.media.settings import SpeechSettings

if TYPE_CHECKING:
    from nodmix.channels.status import ChannelStatus
    from nodmix.media.service import MediaService

log = logging.getLogger("nodmix.channels")

VOICE_KINDS = frozenset({"voice", "audio"})
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_FENCE = re.compile(r"```.*?```", re.DOTALL)
_MARKS = re.compile(r"[*_`#>|~]+")


def speakable(text: str) -> str:
    """A Markdown reply as plain words: links become their text, code blocks and markup go."""
    text = _FENCE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    return " ".join(_MARKS.sub(" ", text).split())


class Channels(Protocol):
    """What spoken replies need of the channel manager."""

    statuses: dict[str, ChannelStatus]

    def adapter(self, channel: str) -> Any: ...

    async def send(self, channel: str, message: OutboundMessage) -> list[str]: ...


class VoiceReplies:
    """Speaks channel replies through the runtime's media service (a `ReplyHook`)."""

    def __init__(self, media: MediaService, channels: Channels) -> None:
        self.media = media
        self.channels = channels

    def wanted(self, msg: InboundMessage, settings: SpeechSettings) -> bool:
        """Whether the reply to `msg` is spoken (before the length check)."""
        if settings.provider is None:
            return False
        chosen = self.media.prefs.get(msg.channel, msg.chat_id)
        if chosen is not None:
            return chosen
        if settings.auto == "always":
            return True
        return settings.auto == "inbound" and any(a.kind in VOICE_KINDS for a in msg.attachments)

    async def after_reply(self, msg: InboundMessage, reply: str) -> None:
        """Send `reply` as a voice message too, when the settings say so."""
        manager = self.channels
        settings = self.media.speech()
        words = speakable(reply)
        if not words or not self.wanted(msg, settings) or len(words) > settings.max_chars:
            return
        try:
            audio = await self.media.speak(words)
        except MediaError as exc:
            self._failed(msg, str(exc))
            return
        adapter = manager.adapter(msg.channel)
        kind, name = "audio", f"reply.{_suffix(settings.format)}"
        if getattr(adapter, "sends_voice", False):
            try:
                audio = await to_ogg_opus(audio)
                kind, name = "voice", "reply.ogg"
            except MediaError as exc:  # ffmpeg missing or failing: an audio file still goes
                self._failed(msg, str(exc))
        with tempfile.TemporaryDirectory(prefix="nodmix-voice-") as folder:
            path = Path(folder) / name
            path.write_bytes(audio)
            attachment = Attachment(kind=kind, name=name, path=path, data=audio)
            outbound = OutboundMessage(
                chat_id=msg.chat_id, thread_id=msg.thread_id, attachments=(attachment,)
            )
            try:
                await manager.send(msg.channel, outbound)
            except Exception as exc:
                self._failed(msg, f"sending the voice reply failed: {exc}")

    def _failed(self, msg: InboundMessage, reason: str) -> None:
        log.warning("%s: voice reply to %s: %s", msg.channel, msg.chat_id, reason)
        status = self.channels.statuses.get(msg.channel)
        if status is not None:
            status.error(f"voice reply: {reason}")


def _suffix(fmt: str) -> str:
    return {"opus": "ogg", "aac": "m4a"}.get(fmt, fmt)


async def _tts(call: CommandCall) -> str:
    voice = call.manager.voice
    if not isinstance(voice, VoiceReplies):
        return "Spoken replies are not available here."
    msg = call.message
    arg = call.args.strip().lower()
    settings = voice.media.speech()
    if arg in ("on", "off", "default"):
        value = None if arg == "default" else arg == "on"
        voice.media.prefs.set(msg.channel, msg.chat_id, value)
    chosen = voice.media.prefs.get(msg.channel, msg.chat_id)
    if settings.provider is None:
        note = " (messages.tts.provider is not set, so nothing is spoken yet)"
    else:
        note = ""
    if chosen is True:
        state = f"on: replies up to {settings.max_chars} characters are also spoken"
    elif chosen is False:
        state = "off in this chat"
    else:
        state = f"as configured (messages.tts.auto: {settings.auto})"
    usage = "" if arg in ("on", "off", "default") else " Use /tts on, /tts off or /tts default."
    return f"Spoken replies: {state}{note}.{usage}"


def register_voice_command() -> None:
    """Add `/tts on|off|default`."""
    register_command(
        ChatCommand(
            name="tts", help="spoken replies in this chat: /tts on|off|default", handler=_tts
        )
    )
