"""Helpers for channel tests: a config with a scripted model and a scripted Bot API."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.support.config import write_json_config


def write_channel_config(
    state: Path,
    model_url: str,
    api: ScriptedBotAPI,
    telegram: dict[str, Any] | None = None,
    **top: Any,
) -> Path:
    """`nodmix.json` pointing the default agent at the scripted model and Telegram at `api`."""
    section = {
        "botToken": api.token,
        "apiBaseUrl": api.url,
        "pollTimeoutSeconds": 1,
        **(telegram or {}),
    }
    return write_json_config(state, model_url, channels={"telegram": section}, **top)


def model_user_texts(server: Any) -> list[str]:
    """The last user message of every request the scripted model received."""
    from nodmix.messages import UserMessage

    out = []
    for recorded in server.requests:
        users = [m for m in recorded.request.messages if isinstance(m, UserMessage)]
        if users:
            out.append(users[-1].text)
    return out


def write_matrix_config(
    state: Path, model_url: str, homeserver: str, matrix: dict[str, Any]
) -> Path:
    """`nodmix.json` pointing the default agent at the scripted model and Matrix at a
    homeserver (`matrix` holds `userId`, the credentials and access rules)."""
    return write_json_config(
        state, model_url, channels={"matrix": {"homeserver": homeserver, **matrix}}
    )


def write_config(state: Path, model_url: str, channels: dict[str, Any], **top: Any) -> Path:
    """`nodmix.json` pointing the default agent at the scripted model, with `channels`."""
    return write_json_config(state, model_url, channels=channels, **top)


def chat_model(request: ModelRequest) -> ModelReply:
    """`call <tool> <json>` makes one tool call and `program <js>` runs a code-mode program;
    a tool result comes back as `tool said: <text>`; anything else is echoed."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        text = "\n".join(getattr(b, "text", "") for b in last.content)
        return ModelReply.text(f"tool said: {text}")
    text = getattr(last, "text", "")
    text = re.sub(r"^\[[^\]]*\] ", "", text)  # a group message carries the sender's name
    text = re.sub(r"^Subject: [^\n]*\n\n", "", text)  # and a mail its subject
    if text.startswith("call "):
        name, args = text.removeprefix("call ").split(" ", 1)
        return ModelReply.tool_call(name, json.loads(args))
    if text.startswith("program "):
        return ModelReply.tool_call("exec", {"code": text.removeprefix("program ")})
    return ModelReply.text(f"echo: {text}")
