"""Discord messages and slash-command interactions as our `InboundMessage` (the only place
that reads discord.py's objects for inbound text).

DMs are keyed by the sender's user id (so `allowFrom`, pairing and the `message` tool all
speak of user ids); guild messages by the channel id, with a thread's id as `thread_id` and
its parent channel as the chat.
"""

from __future__ import annotations

import re

import discord
from nodmix.channels.types import Attachment, InboundMessage

TEXT_LIMIT = 2000
MENTION_KINDS = ("users", "roles", "everyone")


def allowed_mentions(kinds: frozenset[str] = frozenset()) -> discord.AllowedMentions:
    """What the bot's messages may ping: only the kinds `channels.discord.allowedMentions`
    names (none by default; never the author of the message a reply answers). A sender can
    make the model write `@everyone` or a role mention; sent with this, it stays text."""
    return discord.AllowedMentions(
        everyone="everyone" in kinds,
        users="users" in kinds,
        roles="roles" in kinds,
        replied_user=False,
    )


def _where(channel: object, channel_id: int) -> tuple[str, str | None]:
    """`(chat_id, thread_id)` of a guild channel or thread."""
    if isinstance(channel, discord.Thread) and channel.parent_id is not None:
        return str(channel.parent_id), str(channel.id)
    return str(channel_id), None


def to_inbound(message: discord.Message, *, channel: str, bot_id: int) -> InboundMessage | None:
    """The message, or None for messages the layer does not handle (bots, system messages)."""
    if message.author.bot or message.type not in (
        discord.MessageType.default,
        discord.MessageType.reply,
    ):
        return None
    if message.guild is None and not isinstance(message.channel, discord.DMChannel):
        return None  # a guild the client does not know (yet): never mistake it for a DM
    text = message.content
    mentioned = _mentions_bot(message, bot_id)
    text = re.sub(rf"<@!?{bot_id}>", "", text).strip() if mentioned else text
    reference = message.reference
    reply_to = str(reference.message_id) if reference and reference.message_id else None
    name = message.author.display_name
    if message.guild is None:
        return InboundMessage(
            channel=channel,
            chat_type="dm",
            chat_id=str(message.author.id),
            message_id=str(message.id),
            sender_id=str(message.author.id),
            sender_name=name,
            text=text,
            attachments=_attachments(message),
            mentioned=True,
            reply_to=reply_to,
        )
    chat_id, thread_id = _where(message.channel, message.channel.id)
    return InboundMessage(
        channel=channel,
        chat_type="group",
        chat_id=chat_id,
        message_id=str(message.id),
        sender_id=str(message.author.id),
        sender_name=name,
        text=text,
        thread_id=thread_id,
        attachments=_attachments(message),
        mentioned=mentioned,
        reply_to=reply_to,
    )


def command_inbound(
    interaction: discord.Interaction, *, channel: str, name: str
) -> InboundMessage | None:
    """A slash command as the chat command `/name` from the interaction's user."""
    user = interaction.user
    if interaction.channel_id is None:
        return None
    base = {
        "channel": channel,
        "message_id": f"interaction-{interaction.id}",
        "sender_id": str(user.id),
        "sender_name": user.display_name,
        "text": f"/{name}",
        "mentioned": True,
    }
    if interaction.guild_id is None:
        return InboundMessage(chat_type="dm", chat_id=str(user.id), **base)  # type: ignore[arg-type]
    chat_id, thread_id = _where(interaction.channel, interaction.channel_id)
    return InboundMessage(
        chat_type="group",
        chat_id=chat_id,
        thread_id=thread_id,
        **base,  # type: ignore[arg-type]
    )


def guild_of(message: discord.Message) -> str | None:
    """The guild id of a guild message."""
    return str(message.guild.id) if message.guild is not None else None


def _mentions_bot(message: discord.Message, bot_id: int) -> bool:
    if any(user.id == bot_id for user in message.mentions):
        return True
    resolved = message.reference.resolved if message.reference else None
    return isinstance(resolved, discord.Message) and resolved.author.id == bot_id


def _attachments(message: discord.Message) -> tuple[Attachment, ...]:
    found = []
    voice = message.flags.voice
    for item in message.attachments:
        mime = item.content_type or ""
        kind = {"image": "photo", "audio": "voice" if voice else "audio"}.get(
            mime.partition("/")[0], "document"
        )
        found.append(
            Attachment(
                kind=kind,
                ref=item.url,
                name=item.filename,
                size=item.size,
                mime_type=mime or None,
            )
        )
    return tuple(found)
