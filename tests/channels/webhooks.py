"""Gateways for the channels whose platform posts signed requests to the bot (Teams, Google
Chat): the gateway starts with the channel pointing at the test's scripted platform, and the
platform then posts to the gateway's endpoint for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_server import ScriptedTeams
from tests.channels.support import write_config

TEAMS_PATH = "/channels/msteams/messages"
CHAT_PATH = "/channels/googlechat/events"


def start_teams(
    state: Path, model: ScriptedModelServer, teams: ScriptedTeams, **section: Any
) -> BackgroundGateway:
    """A gateway with `channels.msteams` pointing at `teams` (`section` added), ready for
    activities; the caller exits it."""
    return _start(state, model, teams, "msteams", TEAMS_PATH, section)


def start_chat(
    state: Path, model: ScriptedModelServer, chat: ScriptedChat, **section: Any
) -> BackgroundGateway:
    """A gateway with `channels.googlechat` pointing at `chat` (`section` added), ready for
    events; the caller exits it."""
    return _start(state, model, chat, "googlechat", CHAT_PATH, section)


def _start(
    state: Path,
    model: ScriptedModelServer,
    platform: ScriptedTeams | ScriptedChat,
    channel: str,
    path: str,
    section: dict[str, Any],
) -> BackgroundGateway:
    write_config(state, model.base_url, {channel: platform.channel_config(**section)})
    gateway = BackgroundGateway(
        GatewaySettings(port=0, token="gateway-token"), retry=RetryPolicy(attempts=1)
    ).__enter__()
    try:
        platform.endpoint = gateway.url + path
        statuses = gateway.runtime.channels.statuses
        platform.wait_for(lambda: channel in statuses and statuses[channel].connected)
    except BaseException:
        gateway.__exit__(None, None, None)
        raise
    return gateway
