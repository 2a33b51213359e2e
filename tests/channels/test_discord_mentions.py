"""Replies never ping anyone they were not allowed to: the real discord.py against the scripted
Discord server, whose recorded request bodies show the `allowed_mentions` Discord would obey."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.channels.support import write_config

pytestmark = pytest.mark.integration

OWNER = "4242"
PINGS = "@everyone @here look at <@&1111> and <@4242> and <@!77>"


def _pings_nobody(body: dict[str, Any]) -> bool:
    """Discord's rule: nothing in `parse`, no explicit `users`/`roles`, no reply ping."""
    allowed = body.get("allowed_mentions")
    return (
        isinstance(allowed, dict)
        and allowed.get("parse") == []
        and not allowed.get("users")
        and not allowed.get("roles")
        and allowed.get("replied_user", False) is False
    )


@pytest.fixture
def discord() -> Iterator[ScriptedDiscord]:
    with ScriptedDiscord() as server:
        yield server


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(echo) as server:
        server.respond = lambda request: ModelReply.text(PINGS)
        yield server


def _configure(
    state: Path, model: ScriptedModelServer, discord: ScriptedDiscord, **section: Any
) -> None:
    write_config(
        state,
        model.base_url,
        {"discord": {"token": discord.token, "apiBaseUrl": discord.api_url, **section}},
    )


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_a_reply_full_of_mentions_is_sent_with_no_mention_allowed(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    room = discord.channel_ids[0]
    _configure(isolated_state, model, discord, groups=[room], allowFrom=[OWNER])
    with _gateway():
        discord.inject_guild(channel_id=room, sender_id="7", text="say hi to all", mention=True)
        discord.inject_dm(sender_id=OWNER, text="ping them")
        discord.wait_for(lambda: discord.sent_texts(room))
        discord.wait_for(lambda: discord.sent_texts(discord.dm_channel(OWNER)))
    bodies = discord.sent()
    assert len(bodies) == 2
    for body in bodies:
        assert body["content"] == PINGS  # the text is kept: it just notifies nobody
        assert _pings_nobody(body), body


def test_a_slash_command_follow_up_pings_nobody(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord, allowFrom=[OWNER])
    with _gateway():
        discord.wait_for(lambda: discord.sessions_ready)
        discord.inject_command("help", sender_id=OWNER)
        discord.wait_for(lambda: discord.calls_of("POST /webhooks/{app}/{token}"))
    follow_up = discord.calls_of("POST /webhooks/{app}/{token}")[0].body
    assert _pings_nobody(follow_up), follow_up


def test_allowed_mentions_lets_only_the_named_kinds_through(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    _configure(isolated_state, model, discord, allowFrom=[OWNER], allowedMentions=["users"])
    dm = discord.dm_channel(OWNER)
    with _gateway():
        discord.inject_dm(sender_id=OWNER, text="remind ann")
        discord.wait_for(lambda: discord.sent_texts(dm))
    assert discord.sent(dm)[0]["allowed_mentions"]["parse"] == ["users"]


def test_an_unknown_mention_kind_is_a_config_error_naming_the_key(
    isolated_state: Path, discord: ScriptedDiscord, model: ScriptedModelServer
) -> None:
    from tests.gateway.support import run_nodmix

    _configure(isolated_state, model, discord, allowedMentions=["here"])
    result = run_nodmix(isolated_state, "channels", "status")
    assert result.returncode != 0
    assert "channels.discord.allowedMentions" in result.stderr
    assert "Traceback" not in result.stderr
