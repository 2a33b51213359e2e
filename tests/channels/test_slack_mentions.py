"""Replies never ping anyone: a Bolt app on slack_sdk against the scripted Slack server, whose
recorded Web API calls show the exact text Slack would parse. A sender can make the model write
Markdown links whose targets are Slack's special mentions; none may survive as `<!…>`, `<@…>`
or `<#…>`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.slack.mapping import to_mrkdwn
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.slack_server import ScriptedSlack
from tests.channels.support import write_config

pytestmark = pytest.mark.integration

OWNER = "U0OWNER"
DM = "D0OWNER"
ROOM = "C0ROOM"
HOSTILE = (
    "[click](!channel) [now](!here) ![x](!everyone) [you](@U0OTHER) [team](!subteam^S0TEAM) "
    "[room](#C0ROOM) [raw](<!channel>) <!here> <@U0OTHER> [a|b](!channel) "
    "[safe](https://example.org/a?b=1)"
)
_PING = re.compile(r"<[!@#]")


@pytest.fixture
def slack() -> Iterator[ScriptedSlack]:
    with ScriptedSlack() as server:
        yield server


def _configure(state: Path, model: ScriptedModelServer, slack: ScriptedSlack, **extra: str) -> None:
    section = {
        "botToken": slack.bot_token,
        "appToken": slack.app_token,
        "apiBaseUrl": slack.api_url,
        "allowFrom": [OWNER],
        "groups": [ROOM],
        **extra,
    }
    write_config(state, model.base_url, {"slack": section})


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_special_mentions_in_a_reply_reach_slack_as_text_in_dms_and_channels(
    isolated_state: Path, slack: ScriptedSlack
) -> None:
    with ScriptedModelServer(lambda request: ModelReply.text(HOSTILE)) as model:
        _configure(isolated_state, model, slack)
        with _gateway():
            slack.inject_message(channel=DM, user=OWNER, text="ping all", channel_type="im")
            slack.inject_message(channel=ROOM, user="U0BOB", text="ping all", mention=True)
            slack.wait_for(lambda: slack.sent_texts(OWNER) and slack.sent_texts(ROOM))
    texts = slack.sent_texts(OWNER) + slack.sent_texts(ROOM)
    assert len(texts) == 2
    for text in texts:
        assert not _PING.search(text), text
        assert "click (!channel)" in text and "you (@U0OTHER)" in text
        assert "<https://example.org/a?b=1|safe>" in text  # web links stay links
    for call in slack.calls_of("chat.postMessage"):
        assert call.params.get("link_names") in (None, False, "false", "0")


def test_a_streamed_reply_edited_in_place_pings_nobody_either(
    isolated_state: Path, slack: ScriptedSlack
) -> None:
    with ScriptedModelServer(
        lambda request: ModelReply.text("step " * 40 + HOSTILE), event_seconds=0.3
    ) as model:
        _configure(isolated_state, model, slack, streaming="edit")
        with _gateway():
            slack.inject_message(channel=DM, user=OWNER, text="ping all", channel_type="im")
            final = to_mrkdwn("step " * 40 + HOSTILE)
            slack.wait_for(
                lambda: any(c.params["text"] == final for c in slack.calls_of("chat.update")),
                timeout=30,
            )
    for call in slack.calls_of("chat.update") + slack.calls_of("chat.postMessage"):
        assert not _PING.search(str(call.params["text"])), call.params["text"]
