"""Events as Google Chat posts them to an app's HTTP endpoint (the shapes the scripted Chat
service in `googlechat_server` sends)."""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any, Literal

SpaceKind = Literal["DIRECT_MESSAGE", "SPACE"]
SPACE = "spaces/AAAAteam"
APP_USER = "users/100000000000000000001"


@dataclass(frozen=True, slots=True)
class ChatUser:
    """A person in the scripted Workspace domain."""

    name: str

    @property
    def id(self) -> str:
        """Their user resource name (what Nodmix knows them by)."""
        return f"users/{zlib.crc32(self.name.encode()):012d}"

    @property
    def email(self) -> str:
        """Their address."""
        return f"{self.name}@example.org"

    @property
    def dm_space(self) -> str:
        """Their direct-message space with the app."""
        return f"spaces/dm-{self.name}"


def message_event(
    *,
    message_id: str,
    user: ChatUser,
    text: str,
    kind: SpaceKind,
    app_name: str,
    mention: bool = False,
    thread: str | None = None,
    attachments: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A `MESSAGE` event from `user` (with `mention`, the app's mention leads the text and an
    annotation says so; `argumentText` is the text without it)."""
    space_name = user.dm_space if kind == "DIRECT_MESSAGE" else SPACE
    space: dict[str, Any] = {
        "name": space_name,
        "type": "DM" if kind == "DIRECT_MESSAGE" else "ROOM",
        "spaceType": kind,
        "singleUserBotDm": kind == "DIRECT_MESSAGE",
        "displayName": "" if kind == "DIRECT_MESSAGE" else "Team",
    }
    sender = {"name": user.id, "displayName": user.name.title(), "email": user.email}
    sender |= {"type": "HUMAN", "domainId": "example-domain"}
    tag = f"@{app_name}"
    full = f"{tag} {text}" if mention else text
    thread_name = thread or f"{space_name}/threads/t{message_id}"
    message: dict[str, Any] = {
        "name": f"{space_name}/messages/{message_id}.{message_id}",
        "sender": sender,
        "createTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
        "text": full,
        "argumentText": f" {text}" if mention else full,
        "thread": {"name": thread_name, "retentionSettings": {"state": "PERMANENT"}},
        "threadReply": thread is not None,
        "space": space,
    }
    if mention:
        message["annotations"] = [
            {
                "type": "USER_MENTION",
                "startIndex": 0,
                "length": len(tag),
                "userMention": {
                    "user": {"name": APP_USER, "displayName": app_name, "type": "BOT"},
                    "type": "MENTION",
                },
            }
        ]
    if attachments:
        message["attachment"] = attachments
    return {
        "type": "MESSAGE",
        "eventTime": message["createTime"],
        "message": message,
        "user": sender,
        "space": space,
        "configCompleteRedirectUrl": "https://chat.google.com/api/bot_config_complete?token=x",
        "common": {"userLocale": "en", "hostApp": "CHAT"},
    }


def uploaded_attachment(message_name: str, resource: str, name: str, mime: str) -> dict[str, Any]:
    """A file uploaded into Chat: downloadable by the app through `media.download`."""
    return {
        "name": f"{message_name}/attachments/{resource}",
        "contentName": name,
        "contentType": mime,
        "attachmentDataRef": {"resourceName": resource},
        "source": "UPLOADED_CONTENT",
    }
