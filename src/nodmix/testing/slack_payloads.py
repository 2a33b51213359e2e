"""Slack payloads in the shapes Socket Mode and the Events API deliver them, for the scripted
Slack server."""

from __future__ import annotations

import json
import mimetypes
import time
from typing import Any

TEAM = "T0NODMIX"
APP = "A0NODMIX"


def events_api_envelope(
    envelope_id: str, event_id: str, event: dict[str, Any], *, bot_user: str
) -> dict[str, Any]:
    """A Socket Mode `events_api` envelope around an `event_callback` carrying `event` (the
    `payload` is what the Events API would POST)."""
    return {
        "envelope_id": envelope_id,
        "type": "events_api",
        "accepts_response_payload": False,
        "retry_attempt": 0,
        "retry_reason": "",
        "payload": {
            "token": "verification-token",
            "team_id": TEAM,
            "api_app_id": APP,
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM,
                    "user_id": bot_user,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        },
    }


def slash_command_envelope(
    envelope_id: str, command: str, text: str, *, user: str, channel: str
) -> dict[str, Any]:
    """A Socket Mode `slash_commands` envelope (its `payload` is the form Slack would POST)."""
    trigger = f"{int(time.time())}.{envelope_id}"
    return {
        "envelope_id": envelope_id,
        "type": "slash_commands",
        "accepts_response_payload": True,
        "payload": {
            "token": "verification-token",
            "team_id": TEAM,
            "team_domain": "nodmix-test",
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user,
            "user_name": "test.user",
            "command": command,
            "text": text,
            "api_app_id": APP,
            "is_enterprise_install": "false",
            "response_url": "https://hooks.invalid/commands/1",
            "trigger_id": trigger,
        },
    }


def auth_test(bot_user: str, bot_id: str) -> dict[str, Any]:
    """`auth.test` for the bot token."""
    return {
        "url": "https://nodmix-test.slack.com/",
        "team": "Nodmix Test",
        "user": "nodmix",
        "team_id": TEAM,
        "user_id": bot_user,
        "bot_id": bot_id,
        "is_enterprise_install": False,
    }


def user_info(user_id: str) -> dict[str, Any]:
    """`users.info` of a member."""
    return {
        "user": {
            "id": user_id,
            "name": f"user-{user_id}",
            "real_name": "Test User",
            "profile": {"display_name": "", "real_name": "Test User"},
        }
    }


def shared_ids(params: dict[str, Any]) -> list[str]:
    """The file ids a `files.completeUploadExternal` call shares (`files` is JSON text in a
    form, or a list)."""
    files = params.get("files")
    listed = json.loads(files) if isinstance(files, str) else files or []
    return [str(item["id"]) for item in listed]


def history_page(history: dict[str, list[dict[str, Any]]], params: dict[str, Any]) -> Any:
    """`conversations.history`: top-level messages (and thread roots) after `oldest`, newest
    first, at most `limit`."""
    oldest = float(params.get("oldest") or 0)
    found = [
        m
        for m in history.get(str(params.get("channel")), [])
        if float(m["ts"]) > oldest and m.get("thread_ts") in (None, m["ts"])
    ]
    limit = int(params.get("limit") or 100)
    return {"messages": list(reversed(found))[:limit], "has_more": len(found) > limit}


def replies_page(history: dict[str, list[dict[str, Any]]], params: dict[str, Any]) -> Any:
    """`conversations.replies`: a thread's root and its replies after `oldest`, oldest first."""
    root, oldest = str(params.get("ts")), float(params.get("oldest") or 0)
    thread = [
        m
        for m in history.get(str(params.get("channel")), [])
        if m["ts"] == root or (m.get("thread_ts") == root and float(m["ts"]) > oldest)
    ]
    return {"messages": thread[: int(params.get("limit") or 100)], "has_more": False}


def hello() -> dict[str, Any]:
    """The first frame of a Socket Mode connection."""
    return {
        "type": "hello",
        "num_connections": 1,
        "connection_info": {"app_id": APP},
        "debug_info": {"host": "scripted", "approximate_connection_time": 18060},
    }


def file_object(file_id: str, name: str, size: int, base_url: str) -> dict[str, Any]:
    """A file shared in a message (downloadable with the bot token)."""
    return {
        "id": file_id,
        "name": name,
        "mimetype": mimetypes.guess_type(name)[0] or "application/octet-stream",
        "filetype": name.rpartition(".")[2],
        "size": size,
        "url_private_download": f"{base_url}/files-pri/{file_id}/{name}",
    }
