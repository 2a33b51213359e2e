"""Matrix through a real gateway: matrix-nio against a real Synapse homeserver started by the
test session, the agent's model behind a real scripted model server. Nothing from a sender
who is not allowed reaches the model."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.support import model_user_texts, write_matrix_config
from tests.channels.synapse import MatrixUser, Synapse, wait_for
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration


def _name(role: str) -> str:
    return f"{role}{uuid.uuid4().hex[:8]}"


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _joined(user: MatrixUser, room: str, who: str) -> bool:
    return user.members(room).get(who) == "join"


def test_unknown_dm_sender_gets_a_pairing_code_then_the_reply_after_approval(
    isolated_state: Path, synapse: Synapse, model: ScriptedModelServer
) -> None:
    bot, owner = synapse.register(_name("bot")), synapse.register(_name("owner"))
    write_matrix_config(
        isolated_state,
        model.base_url,
        synapse.url,
        {"userId": bot.user_id, "accessToken": bot.token},
    )
    with _gateway():
        room = owner.create_room([bot.user_id], direct=True)
        wait_for(lambda: _joined(owner, room, bot.user_id), "the bot to join the DM")
        owner.say(room, "secret plans")
        texts = wait_for(lambda: owner.texts(room, bot.user_id), "the pairing code")
        assert "pairing code is" in texts[0]
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert len(code) == 8 and code.isalnum() and code.isupper()
        assert model.requests == []

        approved = run_nodmix(isolated_state, "pairing", "approve", "matrix", code)
        assert approved.returncode == 0, approved.stderr

        owner.say(room, "hello agent")
        wait_for(lambda: "hello agent" in owner.texts(room, bot.user_id), "the agent's reply")
        assert model_user_texts(model) == ["hello agent"]
        assert len(owner.texts(room, bot.user_id)) == 2


def test_room_answers_only_new_mentions_and_invites_from_strangers_are_left_alone(
    isolated_state: Path, synapse: Synapse, model: ScriptedModelServer
) -> None:
    bot, owner = synapse.register(_name("bot")), synapse.register(_name("owner"))
    friend, stranger = synapse.register(_name("friend")), synapse.register(_name("stranger"))
    room = owner.create_room([friend.user_id])
    friend.join(room)
    owner.say(room, "an old question from before the bot was here", mention=bot.user_id)
    owner.invite(room, bot.user_id)
    strangers_room = stranger.create_room([bot.user_id])
    write_matrix_config(
        isolated_state,
        model.base_url,
        synapse.url,
        {
            "userId": bot.user_id,
            "accessToken": bot.token,
            "allowFrom": [owner.user_id],
            "groups": [room],
        },
    )
    with _gateway():
        wait_for(lambda: _joined(owner, room, bot.user_id), "the bot to join the room")
        friend.say(room, "nobody asked the bot")
        friend.say(room, f"{bot.user_id.split(':')[0][1:].title()}: what time is it?")
        owner.say(room, "and you, summarise please", mention=bot.user_id)
        replies = wait_for(
            lambda: [t for t in owner.texts(room, bot.user_id) if "summarise" in t],
            "the answer to the mention",
        )
    assert len(replies) == 1
    users = model_user_texts(model)
    assert "nobody asked the bot" not in " ".join(users)
    assert "old question" not in " ".join(users)  # history from before the invitation
    assert any(u.endswith("what time is it?") for u in users)  # mentioned by display name
    assert stranger.members(strangers_room).get(bot.user_id) == "invite"


def test_encrypted_room_gets_one_notice_and_nothing_reaches_the_model(
    isolated_state: Path, synapse: Synapse, model: ScriptedModelServer
) -> None:
    bot, owner = synapse.register(_name("bot")), synapse.register(_name("owner"))
    write_matrix_config(
        isolated_state,
        model.base_url,
        synapse.url,
        {"userId": bot.user_id, "accessToken": bot.token, "allowFrom": [owner.user_id]},
    )
    with _gateway():
        room = owner.create_room([bot.user_id], direct=True, encrypted=True)
        wait_for(lambda: _joined(owner, room, bot.user_id), "the bot to join")
        for n in range(2):
            owner.send_event(
                room,
                "m.room.encrypted",
                {
                    "algorithm": "m.megolm.v1.aes-sha2",
                    "ciphertext": f"opaque{n}",
                    "sender_key": "c2VuZGVyIGtleQ",
                    "device_id": "OWNERDEVICE",
                    "session_id": "c2Vzc2lvbg",
                },
            )
        wait_for(lambda: owner.messages(room, bot.user_id), "the notice")
        wait_for(lambda: _refused(isolated_state) >= 2, "both refusals counted")
        notices = owner.messages(room, bot.user_id)
    assert [n["msgtype"] for n in notices] == ["m.notice"]
    assert "end-to-end encrypted" in notices[0]["body"]
    assert model.requests == []


def _refused(state: Path) -> int:
    path = state / "channels" / "status.json"
    if not path.exists():
        return 0
    rows = json.loads(path.read_text(encoding="utf-8")).get("channels", [])
    return sum(r.get("reasons", {}).get("end-to-end encrypted room", 0) for r in rows)


def test_doctor_checks_the_matrix_credentials_and_names_the_fix(
    isolated_state: Path, synapse: Synapse, model: ScriptedModelServer
) -> None:
    bot = synapse.register(_name("bot"))
    settings = {"userId": bot.user_id, "accessToken": bot.token}
    write_matrix_config(isolated_state, model.base_url, synapse.url, settings)
    doctor = run_nodmix(isolated_state, "doctor")
    assert f"channel matrix: connected as {bot.user_id}" in doctor.stdout

    wrong = {**settings, "accessToken": "syt_not_a_token"}
    write_matrix_config(isolated_state, model.base_url, synapse.url, wrong)
    doctor = run_nodmix(isolated_state, "doctor")
    assert doctor.returncode == 1
    assert "✗ channel matrix: credentials refused" in doctor.stdout
    assert "channels.matrix.userId and accessToken" in doctor.stdout
    assert "Traceback" not in doctor.stdout + doctor.stderr
