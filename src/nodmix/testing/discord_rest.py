"""The REST side of the scripted Discord server: what each route answers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from nodmix.testing import discord_payloads as p


class ScriptedDiscord(Protocol):
    """What the routes read and change of the server (`discord_server.ScriptedDiscord`)."""

    host: str
    port: int
    bot: dict[str, Any]
    app_id: str
    owner: dict[str, Any]
    guild_id: str
    channel_ids: list[str]
    thread_id: str
    commands: list[dict[str, Any]]
    history: dict[str, list[dict[str, Any]]]
    _lock: threading.Lock
    _dms: dict[str, str]
    _interaction_channels: dict[str, str]

    @property
    def app_flags(self) -> int: ...

    def dm_channel(self, user_id: str) -> str: ...


def messages(server: ScriptedDiscord, params: dict[str, str]) -> list[dict[str, Any]]:
    after = int(params.get("query_after") or 0)
    limit = int(params.get("query_limit") or 50)
    with server._lock:
        found = [m for m in server.history.get(params["channel"], []) if int(m["id"]) > after]
    return list(reversed(found[:limit]))  # newest first, as Discord answers


def channel(server: ScriptedDiscord, channel_id: str) -> dict[str, Any] | None:
    with server._lock:
        dm_user = next((u for u, c in server._dms.items() if c == channel_id), None)
    if dm_user is not None:
        recipient = p.user(dm_user, "Test User")
        return {"id": channel_id, "type": p.DM_CHANNEL, "recipients": [recipient]}
    if channel_id in server.channel_ids:
        return p.text_channel(channel_id, server.guild_id, "room")
    if channel_id == server.thread_id:
        return p.thread(channel_id, server.channel_ids[0], server.guild_id, server.owner["id"])
    return None


def set_commands(server: ScriptedDiscord, body: Any) -> list[dict[str, Any]]:
    commands = []
    for command in body or []:
        existing = next((c for c in server.commands if c["name"] == command["name"]), None)
        cid = existing["id"] if existing else p.snowflake()
        commands.append({**command, "id": cid, "application_id": server.app_id, "version": cid})
    server.commands = commands
    return commands


def callback(server: ScriptedDiscord, params: dict[str, str], body: Any) -> dict[str, Any]:
    response_type = int((body or {}).get("type", 5))
    return {
        "interaction": {
            "id": params["interaction"],
            "type": 2,
            "response_message_loading": response_type == 5,
            "response_message_ephemeral": False,
        },
        "resource": {"type": response_type},
    }


def posted(server: ScriptedDiscord, channel_id: str, body: dict[str, Any]) -> dict[str, Any]:
    data = p.message(
        message_id=p.snowflake(),
        channel_id=channel_id,
        author=server.bot,
        content=body.get("content") or "",
        embeds=body.get("embeds"),
    )
    body["id"] = data["id"]
    return data


def followup(server: ScriptedDiscord, params: dict[str, str], body: Any) -> Any:
    interaction = params["token"].removeprefix("itoken-")
    params["channel"] = server._interaction_channels.get(interaction, "")
    return posted(server, params["channel"], body)


ROUTES: dict[str, Callable[[ScriptedDiscord, dict[str, str], Any], Any]] = {
    "GET /users/@me": lambda s, _p, _b: s.bot,
    "GET /oauth2/applications/@me": lambda s, _p, _b: p.application(s.app_id, s.owner, s.app_flags),
    "GET /gateway/bot": lambda s, _p, _b: {
        "url": f"ws://{s.host}:{s.port}/gateway",
        "shards": 1,
        "session_start_limit": {
            "total": 1000,
            "remaining": 999,
            "reset_after": 0,
            "max_concurrency": 1,
        },
    },
    "POST /channels/{id}/messages": lambda s, ps, b: posted(s, ps["channel"], b),
    "POST /channels/{id}/typing": lambda s, _p, _b: None,
    "POST /users/@me/channels": lambda s, _p, b: {
        "id": s.dm_channel(b["recipient_id"]),
        "type": p.DM_CHANNEL,
        "recipients": [p.user(str(b["recipient_id"]), "Test User")],
        "last_message_id": None,
    },
    "GET /users/{id}": lambda s, ps, _b: p.user(ps["id"], "Test User"),
    "GET /channels/{id}": lambda s, ps, _b: channel(s, ps["channel"]),
    "GET /channels/{id}/messages": lambda s, ps, _b: messages(s, ps),
    "GET " + p.COMMANDS_ROUTE: lambda s, _p, _b: s.commands,
    "PUT " + p.COMMANDS_ROUTE: lambda s, _p, b: set_commands(s, b),
    "POST /interactions/{id}/{token}/callback": lambda s, ps, b: callback(s, ps, b),
    "POST /webhooks/{app}/{token}": followup,
}
