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

from nodmix.channels.types import Attachment, InboundMessage

TEXT_LIMIT = 4000
"""Slack truncates longer `text`; stay within its recommended length."""
HANDLED_SUBTYPES = (None, "file_share", "thread_broadcast")
_LINK = re.compile(r"<(https?://[^|>]+)\|([^>]+)>")
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


def _plain(text: str) -> str:
    """Slack's escapes and `<url|label>` links as plain text for the agent."""
    return html.unescape(_LINK.sub(r"\2 (\1)", text))


def _files(event: dict[str, Any]) -> tuple[Attachment, ...]:
    found = []
    for item in event.get("files") or []:
        url = item.get("url_private_download") or item.get("url_private")
        if not url:
            continue
        image = str(item.get("mimetype", "")).startswith("image/")
        found.append(
            Attachment(kind="photo" if image else "document", ref=url, name=item.get("name"))
        )
    return tuple(found)


def to_mrkdwn(markdown: str) -> str:
    """Markdown as Slack mrkdwn: bold, italics, strike, links, headings and lists converted;
    `&`, `<` and `>` escaped as Slack requires (a `>` starting a line stays a quote)."""
    escaped = markdown.replace("&", "&amp;").replace("<", "&lt;")
    escaped = re.sub(r"(?m)(?<!^)>", "&gt;", escaped)
    converted: str = _converter.convert(escaped)
    return converted
