"""Activities as the Bot Connector posts them for Microsoft Teams (the shapes the scripted
Teams service in `msteams_server` sends)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

ConversationKind = Literal["personal", "groupChat", "channel"]
GROUP_CHAT = "19:groupchat-1@thread.v2"
CHANNEL = "19:channel-1@thread.tacv2"


@dataclass(frozen=True, slots=True)
class TeamsUser:
    """A person in the scripted tenant."""

    name: str

    @property
    def id(self) -> str:
        """Their Bot Framework id."""
        return f"29:1{self.name}"

    @property
    def aad(self) -> str:
        """Their Entra object id (what Nodmix knows them by)."""
        return f"aad-{self.name}"

    @property
    def personal_conversation(self) -> str:
        """Their personal chat with the bot."""
        return f"a:1personal-{self.name}"


def message_activity(
    *,
    activity_id: str,
    service_url: str,
    user: TeamsUser,
    bot_id: str,
    bot_name: str,
    text: str,
    kind: ConversationKind,
    tenant: str,
    mention: bool = False,
    thread: str | None = None,
    attachments: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A `message` activity from `user` (with `mention`, an `<at>` mention of the bot leads
    the text and an entity says so)."""
    if mention:
        text = f"<at>{bot_name}</at> {text}"
    if kind == "personal":
        conversation: dict[str, Any] = {"id": user.personal_conversation}
    elif kind == "groupChat":
        conversation = {"id": GROUP_CHAT, "isGroup": True}
    else:
        conversation = {"id": f"{CHANNEL};messageid={thread or activity_id}", "isGroup": True}
    conversation |= {"conversationType": kind, "tenantId": tenant}
    channel_data: dict[str, Any] = {"tenant": {"id": tenant}}
    if kind == "channel":
        channel_data |= {"channel": {"id": CHANNEL}, "team": {"id": "19:team-1@thread.tacv2"}}
    activity: dict[str, Any] = {
        "type": "message",
        "id": activity_id,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "serviceUrl": service_url,
        "channelId": "msteams",
        "from": {"id": user.id, "name": user.name.title(), "aadObjectId": user.aad},
        "conversation": conversation,
        "recipient": {"id": bot_id, "name": bot_name},
        "textFormat": "plain",
        "text": text,
        "locale": "en-US",
        "channelData": channel_data,
    }
    if mention:
        activity["entities"] = [
            {
                "type": "mention",
                "mentioned": {"id": bot_id, "name": bot_name},
                "text": f"<at>{bot_name}</at>",
            }
        ]
    if attachments:
        activity["attachments"] = attachments
    return activity


def file_attachment(name: str, download_url: str) -> dict[str, Any]:
    """A file sent in a personal chat: a pre-authorised download URL."""
    return {
        "contentType": "application/vnd.microsoft.teams.file.download.info",
        "name": name,
        "content": {
            "downloadUrl": download_url,
            "uniqueId": name,
            "fileType": name.rpartition(".")[2],
        },
    }


def inline_image(url: str, content_type: str = "image/png") -> dict[str, Any]:
    """An image pasted into the message: served by the Bot Connector to the bot's token."""
    return {"contentType": content_type, "contentUrl": url}
