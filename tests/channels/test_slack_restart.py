"""A gateway killed with SIGKILL in the middle of a Slack turn answers the pending message
once after a restart, even when Slack sends the event again."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import anyio
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.slack_server import ScriptedSlack
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import GatewayProcess, wait_until

pytestmark = pytest.mark.integration

OWNER = "U0OWNER"


def test_sigkill_mid_turn_then_restart_answers_the_pending_message_once(
    isolated_state: Path,
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text("the answer")

    with ScriptedModelServer(respond) as model, ScriptedSlack() as slack:
        section = {
            "botToken": slack.bot_token,
            "appToken": slack.app_token,
            "apiBaseUrl": slack.api_url,
            "allowFrom": [OWNER],
        }
        write_config(isolated_state, model.base_url, {"slack": section})
        with GatewayProcess(isolated_state) as gateway:
            slack.inject_message(channel="D1", user=OWNER, text="are you there?", channel_type="im")
            wait_until(first_call.is_set, what="the first model request")
            gateway.stop(signal.SIGKILL)
        assert slack.sent_texts(OWNER) == []
        assert slack.unacked() == 0, "acknowledged once accepted, before the turn ended"

        with GatewayProcess(isolated_state):
            slack.wait_for(lambda: slack.sent_texts(OWNER))
            assert slack.retry_all() == 1  # Slack sends the event again
            slack.inject_message(channel="D1", user=OWNER, text="and now?", channel_type="im")
            slack.wait_for(lambda: len(slack.sent_texts(OWNER)) >= 2)
            slack.wait_for(lambda: slack.unacked() == 0)
        assert slack.sent_texts(OWNER) == ["the answer", "the answer"]
        assert model_user_texts(model)[-2:] == ["are you there?", "and now?"]
        assert len(model.requests) == 3


def test_events_sent_while_the_gateway_was_stopped_arrive_when_it_reconnects(
    isolated_state: Path,
) -> None:
    from nodmix.gateway import BackgroundGateway, GatewaySettings
    from nodmix.providers.retry import RetryPolicy
    from nodmix.testing.scripts.echo import respond as echo

    def gateway() -> BackgroundGateway:
        settings = GatewaySettings(port=0, token=None)
        return BackgroundGateway(settings, retry=RetryPolicy(attempts=1))

    with ScriptedModelServer(echo) as model, ScriptedSlack() as slack:
        section = {
            "botToken": slack.bot_token,
            "appToken": slack.app_token,
            "apiBaseUrl": slack.api_url,
            "allowFrom": [OWNER],
        }
        write_config(isolated_state, model.base_url, {"slack": section})
        with gateway():
            slack.inject_message(channel="D1", user=OWNER, text="one", channel_type="im")
            slack.wait_for(lambda: slack.sent_texts(OWNER))
        # Slack keeps (and retries) events for an app with no open connection.
        slack.inject_message(channel="D1", user=OWNER, text="two", channel_type="im")
        with gateway():
            slack.wait_for(lambda: len(slack.sent_texts(OWNER)) >= 2)
            slack.wait_for(lambda: slack.unacked() == 0)
        assert slack.sent_texts(OWNER) == ["one", "two"]
        assert model_user_texts(model) == ["one", "two"]


def test_messages_slack_gave_up_on_are_read_back_from_the_history_once(
    isolated_state: Path,
) -> None:
    from nodmix.gateway import BackgroundGateway, GatewaySettings
    from nodmix.providers.retry import RetryPolicy
    from nodmix.testing.scripts.echo import respond as echo

    def gateway() -> BackgroundGateway:
        settings = GatewaySettings(port=0, token=None)
        return BackgroundGateway(settings, retry=RetryPolicy(attempts=1))

    room = "C0ROOM"
    with ScriptedModelServer(echo) as model, ScriptedSlack() as slack:
        section = {
            "botToken": slack.bot_token,
            "appToken": slack.app_token,
            "apiBaseUrl": slack.api_url,
            "allowFrom": [OWNER],
            "groups": [room],
        }
        write_config(isolated_state, model.base_url, {"slack": section})
        root = slack.next_ts()
        with gateway():
            slack.inject_message(channel="D1", user=OWNER, text="one", channel_type="im")
            slack.inject_message(
                channel=room, user="U7", text="start", thread_ts=root, mention=True
            )
            slack.wait_for(lambda: slack.sent_texts(OWNER) and slack.sent_texts(room))

        slack.inject_message(channel="D1", user=OWNER, text="two", channel_type="im")
        slack.inject_message(channel=room, user="U7", text="more", thread_ts=root, mention=True)
        assert slack.expire_queued() == 2  # Slack stopped retrying while nobody was connected

        with gateway():
            slack.wait_for(lambda: len(slack.sent_texts(OWNER)) >= 2)
            slack.wait_for(lambda: len(slack.sent_texts(room)) >= 2)
            # A second start reads nothing back again.
        with gateway():
            slack.wait_for(lambda: len(slack.calls_of("apps.connections.open")) >= 3)
            slack.wait_for(lambda: len(slack.calls_of("conversations.replies")) >= 2)
        assert slack.sent_texts(OWNER) == ["one", "two"]
        assert slack.sent_texts(room) == ["[Test User] start", "[Test User] more"]
        assert [p.get("thread_ts") for p in slack.posted(room)] == [root, root]
        assert len(model.requests) == 4
