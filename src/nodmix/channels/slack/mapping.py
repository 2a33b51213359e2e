"""Slack events as our `InboundMessage`, and our Markdown replies as Slack mrkdwn (the only
place that reads Slack's event shapes).

Direct messages are keyed by the sender's user id (`chat.postMessage` to a user id lands in
the app's DM with them), so `allowFrom`, pairing and the `message` tool all speak of user
ids; channel messages by the channel id, with the thread's root `ts` as `thread_id`.
"""

from __future__ import annotations

import html
import re
from typing import Any

from markdown_to_mrkdwn import SlackMarkdownConverter

from nodmix.channels.commands import COMMANDS
from nodmix.channels.types import Attachment, InboundMessage

TEXT_LIMIT = 4000
"""Slack truncates longer `text`; stay within its recommended length."""
HANDLED_SUBTYPES = (None, "file_share", "thread_broadcast")
_LINK = re.compile(r"<(https?://[^|>]+)\|([^>]+)>")
_ANGLED = re.compile(r"<([^<>]*)>")
_SAFE_TARGET = re.compile(r"(?i)(https?://|mailto:)[^\s|<>]+")
_converter = SlackMarkdownConverter()


def to_inbound(
    event: dict[str, Any], *, channel: str, bot_user: str, sender_name: str = ""
) -> InboundMessage | None:
    """A `message` or `app_mention` event, or None for events the layer does not handle
    (edits, deletions, joins, other bots, the bot's own messages)."""
    user = event.get("user")
    if not user or user == bot_user or event.get("bot_id"):
        return None
    if event.get("subtype") not in HANDLED_SUBTYPES or "ts" not in event:
        return None
    text = str(event.get("text") or "")
    tag = f"<@{bot_user}>"
    mentioned = (
        tag in text or event.get("type") == "app_mention" or event.get("parent_user_id") == bot_user
    )
    text = _plain(text.replace(tag, "").strip())
    ts = str(event["ts"])
    thread = event.get("thread_ts")
    thread_id = str(thread) if thread and thread != ts else None
    direct = event.get("channel_type") == "im" or str(event.get("channel", "")).startswith("D")
    return InboundMessage(
        channel=channel,
        chat_type="dm" if direct else "group",
        chat_id=str(user) if direct else str(event.get("channel")),
        message_id=ts,
        sender_id=str(user),
        sender_name=sender_name,
        text=text,
        thread_id=thread_id,
        attachments=_files(event),
        mentioned=True if direct else mentioned,
    )


def command_inbound(command: dict[str, Any], *, channel: str) -> InboundMessage | None:
    """A Slack slash command as a message: a command named like a chat command (`/new`) is that
    command; any other name (`/nodmix`) carries a chat command (`/nodmix new`) or a prompt
    (`/nodmix what is on today?`) as its text."""
    user, where = command.get("user_id"), str(command.get("channel_id") or "")
    name = str(command.get("command") or "").lstrip("/")
    args = str(command.get("text") or "").strip()
    if not user or not where or not name or not (args or name in COMMANDS):
        return None
    first = args.split(" ", 1)[0].lstrip("/").lower()
    if name in COMMANDS:
        text = f"/{name} {args}".strip()
    elif first in COMMANDS:
        text = "/" + args.lstrip("/")
    else:
        text = args
    direct = where.startswith("D")
    return InboundMessage(
        channel=channel,
        chat_type="dm" if direct else "group",
        chat_id=str(user) if direct else where,
        message_id=f"command-{command.get('trigger_id') or command.get('command_ts', '')}",
        sender_id=str(user),
        sender_name=str(command.get("user_name") or ""),
        text=text,
        mentioned=True,
    )


def _plain(text: str) -> str:
    """Slack's escapes and `<url|label>` links as plain text for the agent."""
    return html.unescape(_LINK.sub(r"\2 (\1)", text))


def _files(event: dict[str, Any]) -> tuple[Attachment, ...]:
    found = []
    for item in event.get("files") or []:
        url = item.get("url_private_download") or item.get("url_private")
        if not url:
            continue
        mime = str(item.get("mimetype", ""))
        kind = {"image": "photo", "audio": "audio"}.get(mime.partition("/")[0], "document")
        if item.get("subtype") == "slack_audio":  # a clip recorded in Slack
            kind = "voice"
        size = item.get("size")
        found.append(
            Attachment(
                kind=kind,
                ref=url,
                name=item.get("name"),
                size=size if type(size) is int and size >= 0 else None,
                mime_type=mime or None,
            )
        )
    return tuple(found)


def to_mrkdwn(markdown: str) -> str:
    """Markdown as Slack mrkdwn: bold, italics, strike, links, headings and lists converted;
    `&`, `<` and `>` escaped as Slack requires (a `>` starting a line stays a quote).

    A reply never mentions anyone: every `<...>` left after the conversion came from a
    Markdown link or image, and only web and mail links stay links. Any other target
    (`[click](!channel)` would become `<!channel|click>`, `<@U…|x>` a user mention,
    `<!subteam^…>` a group ping, `<#C…>` a channel link) is written out as plain text."""
    escaped = markdown.replace("&", "&amp;").replace("<", "&lt;")
    escaped = re.sub(r"(?m)(?<!^)>", "&gt;", escaped)
    converted: str = _converter.convert(escaped)
    return _ANGLED.sub(_defuse, converted)


def _defuse(match: re.Match[str]) -> str:
    """A converted `<target|label>` kept when the target is a web or mail address, else its
    label and target as text that Slack does not parse (`>` and `<` escaped)."""
    target, _, label = match.group(1).partition("|")
    if _SAFE_TARGET.fullmatch(target):
        return match.group(0)
    text = f"{label} ({target})" if label and label != target else target
    return text.replace("<", "&lt;").replace(">", "&gt;")
