"""Slack payloads in the shapes Socket Mode and the Events API deliver them, for the scripted
Slack server."""

from __future__ import annotations

import json
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
