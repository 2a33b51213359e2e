"""Replies streamed by editing the message on Matrix (`m.replace` edits), against a real
Synapse homeserver and a scripted model that streams slowly."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import write_matrix_config
from tests.channels.synapse import Synapse, wait_for

pytestmark = pytest.mark.integration


def test_a_streamed_reply_is_one_message_edited_until_it_shows_the_whole_reply(
    isolated_state: Path, synapse: Synapse
) -> None:
    bot = synapse.register(f"bot{uuid.uuid4().hex[:8]}")
    owner = synapse.register(f"owner{uuid.uuid4().hex[:8]}")
    reply = ("First the plan. " * 20 + "Then the details. " * 20 + "In short: done. " * 20).strip()
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=0.6) as model:
        write_matrix_config(
            isolated_state,
            model.base_url,
            synapse.url,
            {
                "userId": bot.user_id,
                "accessToken": bot.token,
                "allowFrom": [owner.user_id],
                "streaming": "edit",
                "typing": False,
            },
        )
        gateway = BackgroundGateway(
            GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1)
        )
        with gateway:
            room = owner.create_room([bot.user_id], direct=True)
            wait_for(lambda: owner.members(room).get(bot.user_id) == "join", "the bot to join")
            owner.say(room, "plan my week")
            wait_for(lambda: owner.shown(room, bot.user_id) == [reply], "the whole reply")
    contents = owner.messages(room, bot.user_id)
    edits = [c for c in contents if (c.get("m.relates_to") or {}).get("rel_type") == "m.replace"]
    assert len(edits) >= 1 and len(contents) == len(edits) + 1
    assert contents[0]["body"] != reply, "the first words went out before the end"
    assert all(e["body"] == "* " + e["m.new_content"]["body"] for e in edits)
