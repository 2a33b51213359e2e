"""Discord API payloads in the shapes the REST API and the Gateway send them (API v10), for the
scripted Discord server: users, guilds with channels and threads, messages, interactions."""

from __future__ import annotations

import datetime
import itertools
import re
from typing import Any

TEXT_CHANNEL = 0
DM_CHANNEL = 1
PUBLIC_THREAD = 11
_EPOCH_MS = 1420070400000
_counter = itertools.count(1)
COMMANDS_ROUTE = "/applications/{app}/commands"


def snowflake() -> str:
    """A fresh snowflake id (time-ordered like Discord's)."""
    now_ms = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    return str(((now_ms - _EPOCH_MS) << 22) | (next(_counter) & 0x3FFFFF))


def timestamp() -> str:
    """Now, as Discord writes timestamps."""
    return datetime.datetime.now(datetime.UTC).isoformat()


def user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    """A user object."""
    return {
        "id": user_id,
        "username": name.lower().replace(" ", "_"),
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
        "flags": 0,
    }


def member(person: dict[str, Any]) -> dict[str, Any]:
    """A guild member object (as in a MESSAGE_CREATE: without `user`)."""
    return {
        "roles": [],
        "joined_at": timestamp(),
        "deaf": False,
        "mute": False,
        "flags": 0,
        "nick": None,
        "avatar": None,
        "pending": False,
        "user": person,
    }


MESSAGE_CONTENT_LIMITED = 1 << 19
"""Application flag: the Message Content intent is switched on (for a bot in < 100 guilds)."""


def application(app_id: str, owner: dict[str, Any], flags: int = 0) -> dict[str, Any]:
    """`GET /oauth2/applications/@me`."""
    return {
        "id": app_id,
        "name": "Nodmix Test",
        "icon": None,
        "description": "",
        "bot_public": True,
        "bot_require_code_grant": False,
        "owner": owner,
        "verify_key": "0" * 64,
        "flags": flags,
        "team": None,
        "summary": "",
        "rpc_origins": [],
        "interactions_endpoint_url": None,
    }


def text_channel(channel_id: str, guild_id: str, name: str) -> dict[str, Any]:
    """A guild text channel."""
    return {
        "id": channel_id,
        "type": TEXT_CHANNEL,
        "guild_id": guild_id,
        "name": name,
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
    }


def thread(thread_id: str, parent_id: str, guild_id: str, owner_id: str) -> dict[str, Any]:
    """A public thread under a text channel."""
    return {
        "id": thread_id,
        "type": PUBLIC_THREAD,
        "guild_id": guild_id,
        "parent_id": parent_id,
        "owner_id": owner_id,
        "name": f"thread {thread_id}",
        "last_message_id": None,
        "message_count": 0,
        "member_count": 1,
        "rate_limit_per_user": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": timestamp(),
            "locked": False,
        },
    }


def guild(
    guild_id: str, owner_id: str, channels: list[dict[str, Any]], threads: list[dict[str, Any]]
) -> dict[str, Any]:
    """A GUILD_CREATE payload."""
    return {
        "id": guild_id,
        "name": f"guild {guild_id}",
        "icon": None,
        "owner_id": owner_id,
        "unavailable": False,
        "large": False,
        "member_count": 2,
        "joined_at": timestamp(),
        "features": [],
        "roles": [
            {
                "id": guild_id,
                "name": "@everyone",
                "permissions": "68608",
                "position": 0,
                "color": 0,
                "hoist": False,
                "managed": False,
                "mentionable": False,
                "flags": 0,
            }
        ],
        "emojis": [],
        "stickers": [],
        "members": [],
        "channels": channels,
        "threads": threads,
        "voice_states": [],
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "system_channel_flags": 0,
    }


def message(
    *,
    message_id: str,
    channel_id: str,
    author: dict[str, Any],
    content: str,
    guild_id: str | None = None,
    mentions: list[dict[str, Any]] | None = None,
    attachments: list[dict[str, Any]] | None = None,
    embeds: list[dict[str, Any]] | None = None,
    referenced: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A message object (MESSAGE_CREATE's `d`, or a REST answer)."""
    data: dict[str, Any] = {
        "id": message_id,
        "type": 0 if referenced is None else 19,
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": timestamp(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": [],
        "attachments": attachments or [],
        "embeds": embeds or [],
        "pinned": False,
        "flags": 0,
        "components": [],
    }
    if guild_id is not None:
        data["guild_id"] = guild_id
        data["member"] = {k: v for k, v in member(author).items() if k != "user"}
    if referenced is not None:
        data["message_reference"] = {
            "message_id": referenced["id"],
            "channel_id": channel_id,
            "guild_id": guild_id,
        }
        data["referenced_message"] = referenced
    return data


def interaction(
    *,
    interaction_id: str,
    app_id: str,
    token: str,
    command: dict[str, Any],
    person: dict[str, Any],
    channel: dict[str, Any],
    guild_id: str | None,
) -> dict[str, Any]:
    """An INTERACTION_CREATE for a slash command (type 2) without options."""
    data: dict[str, Any] = {
        "id": interaction_id,
        "application_id": app_id,
        "type": 2,
        "token": token,
        "version": 1,
        "data": {"id": command["id"], "name": command["name"], "type": 1},
        "channel_id": channel["id"],
        "channel": channel,
        "locale": "en-US",
        "app_permissions": "0",
        "attachment_size_limit": 10485760,
        "entitlements": [],
        "authorizing_integration_owners": {"0": guild_id} if guild_id else {"1": person["id"]},
        "context": 0 if guild_id else 1,
    }
    if guild_id is not None:
        data["guild_id"] = guild_id
        data["guild_locale"] = "en-US"
        data["member"] = {**member(person), "permissions": "68608"}
    else:
        data["user"] = person
    return data


ROUTE_PATTERNS = [
    (re.compile(r"/channels/(?P<channel>\d+)/(?P<rest>messages|typing)"), "/channels/{id}/{rest}"),
    (re.compile(r"/channels/(?P<channel>\d+)"), "/channels/{id}"),
    (re.compile(r"/applications/(?P<app>\d+)/commands"), COMMANDS_ROUTE),
    (
        re.compile(r"/interactions/(?P<interaction>\d+)/(?P<token>[^/]+)/callback"),
        "/interactions/{id}/{token}/callback",
    ),
    (re.compile(r"/webhooks/(?P<app>\d+)/(?P<token>[^/]+)"), "/webhooks/{app}/{token}"),
    (re.compile(r"/users/(?P<id>\d+)"), "/users/{id}"),
]


def match_route(method: str, path: str) -> tuple[str, dict[str, str]]:
    """`("POST /channels/{id}/messages", {"channel": "..."})` for a request path."""
    for pattern, shape in ROUTE_PATTERNS:
        found = pattern.fullmatch(path)
        if found:
            params = found.groupdict()
            return f"{method} " + shape.replace("{rest}", params.pop("rest", "")), params
    return f"{method} {path}", {}
