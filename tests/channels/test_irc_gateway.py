"""IRC through a real gateway: pydle against a real ngircd on 127.0.0.1, people on plain
sockets, the agent's model behind a scripted model server. Nothing from a sender who is not
allowed reaches the model."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from tests.channels.irc_daemon import IrcUser, Ngircd, wait_until
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import GatewayProcess, run_nodmix

pytestmark = pytest.mark.integration

BOT = "nodbot"
ROOM = "#lounge"
ANN = "ann!~person@127.0.0.1"
"""How ngircd shows `IrcUser(port, "ann")` (no ident, no DNS): her sender id."""


@pytest.fixture
def ircd(tmp_path: Path) -> Iterator[Ngircd]:
    server = Ngircd(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def people(ircd: Ngircd) -> Iterator[dict[str, IrcUser]]:
    users: dict[str, IrcUser] = {}
    yield users
    for user in users.values():
        user.close()


def _config(state: Path, model: ScriptedModelServer, ircd: Ngircd, **irc: Any) -> None:
    section = {
        "host": "127.0.0.1",
        "port": ircd.port,
        "tls": False,
        "nick": BOT,
        "channels": [ROOM],
        "lineDelaySeconds": 0.05,
        **irc,
    }
    write_config(state, model.base_url, {"irc": section})


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _bot_in_room(user: IrcUser) -> bool:
    return any(line.startswith(f":{BOT}!") and " JOIN " in line for line in user.lines)


def test_unknown_nick_gets_a_pairing_code_and_the_model_sees_nothing_until_approved(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer, people: dict[str, IrcUser]
) -> None:
    _config(isolated_state, model, ircd)
    with _gateway() as gateway:
        wait_until(lambda: gateway.runtime.channels.statuses["irc"].connected, what="connected")
        ann = people["ann"] = IrcUser(ircd.port, "ann")
        ann.say(BOT, "secret plans")
        texts = ann.wait_for(lambda: ann.received(sender=BOT))
        assert "pairing code is" in texts[0]
        code = texts[0].split("pairing code is ", 1)[1][:8]
        assert model.requests == []

        listed = run_nodmix(isolated_state, "pairing", "list", "irc")
        assert code in listed.stdout and "ann" in listed.stdout
        approved = run_nodmix(isolated_state, "pairing", "approve", "irc", code)
        assert approved.returncode == 0, approved.stderr

        ann.say(BOT, "hello agent")
        ann.wait_for(lambda: "hello agent" in ann.received(sender=BOT))
        assert model_user_texts(model) == ["hello agent"]


def test_allowlist_matches_nick_user_host_masks_and_refuses_everyone_else(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer, people: dict[str, IrcUser]
) -> None:
    _config(isolated_state, model, ircd, dmPolicy="allowlist", allowFrom=["ann!*trusted@*"])
    with _gateway() as gateway:
        wait_until(lambda: gateway.runtime.channels.statuses["irc"].connected, what="connected")
        mallory = people["mallory"] = IrcUser(ircd.port, "mallory", user="other")
        ann = people["ann"] = IrcUser(ircd.port, "ann", user="trusted")
        mallory.say(BOT, "let me in")
        ann.say(BOT, "it is me")
        ann.wait_for(lambda: ann.received(sender=BOT))
        status = gateway.runtime.channels.statuses["irc"]
        wait_until(lambda: status.refused == 1, what="mallory refused")
    assert ann.received(sender=BOT) == ["it is me"]
    assert mallory.received(sender=BOT) == []
    assert model_user_texts(model) == ["it is me"]


def test_a_channel_message_reaches_the_agent_only_when_it_names_the_bot(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer, people: dict[str, IrcUser]
) -> None:
    _config(isolated_state, model, ircd)
    ann = people["ann"] = IrcUser(ircd.port, "ann")
    ann.join(ROOM)
    with _gateway() as gateway:
        ann.wait_for(lambda: _bot_in_room(ann), what="the bot joined")
        ann.say(ROOM, "just chatting among ourselves")
        ann.say(ROOM, f"{BOT}: what time is it")
        ann.wait_for(lambda: ann.received(target=ROOM, sender=BOT))
        keys = [s.key for s in gateway.runtime.sessions.list_sessions()]
        assert f"agent:main:irc:group:{ROOM}" in keys
        status = gateway.runtime.channels.statuses["irc"]
        wait_until(lambda: status.ignored == 1, what="the unaddressed message ignored")
    assert ann.received(target=ROOM, sender=BOT) == ["[ann] what time is it"]
    assert model_user_texts(model) == ["[ann] what time is it"]


def test_a_long_reply_arrives_as_lines_within_512_bytes_without_splitting_characters(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer, people: dict[str, IrcUser]
) -> None:
    words = [f"größe{i:03d}ü€" for i in range(400)]
    long = " ".join(words) + "\n\n" + "ñ" * 700
    model.respond = lambda request: ModelReply.text(long)
    _config(isolated_state, model, ircd, allowFrom=[ANN])
    with _gateway() as gateway:
        wait_until(lambda: gateway.runtime.channels.statuses["irc"].connected, what="connected")
        ann = people["ann"] = IrcUser(ircd.port, "ann")
        ann.say(BOT, "write a lot")
        ann.wait_for(lambda: "".join(ann.received(sender=BOT)).count("ñ") >= 700)
    raw = ann.raw_privmsgs()
    assert len(raw) > 10
    assert all(len(line) + 2 <= 512 for line in raw)
    texts = [line.decode("utf-8") for line in raw]  # strict: no character was cut in two
    received = ann.received(sender=BOT)
    assert len(received) == len(texts)
    tail = [line for line in received if set(line) == {"ñ"}]
    assert " ".join(line for line in received if line not in tail).split() == words
    assert "".join(tail) == "ñ" * 700


def test_after_the_server_restarts_the_bot_reconnects_rejoins_and_answers(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer, people: dict[str, IrcUser]
) -> None:
    _config(isolated_state, model, ircd, groupPolicy="open")
    with _gateway() as gateway:
        status = gateway.runtime.channels.statuses["irc"]
        wait_until(lambda: status.connected, what="connected")
        ircd.stop()
        wait_until(lambda: not status.connected, what="the disconnect noticed")
        ircd.start()
        ann = IrcUser(ircd.port, "ann")
        people["ann"] = ann
        ann.join(ROOM)
        ann.wait_for(lambda: _bot_in_room(ann), timeout=30, what="the bot rejoined")
        ann.say(ROOM, f"{BOT}, are you back?")
        ann.wait_for(lambda: ann.received(target=ROOM, sender=BOT))
    assert ann.received(target=ROOM, sender=BOT) == ["[ann] are you back?"]


def test_sigkill_mid_turn_then_restart_answers_the_accepted_message_once(
    isolated_state: Path, ircd: Ngircd, people: dict[str, IrcUser]
) -> None:
    first_call = threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not first_call.is_set():
            first_call.set()
            await anyio.sleep_forever()  # the gateway dies while the model "thinks"
        return ModelReply.text("the answer")

    with ScriptedModelServer(respond) as model:
        _config(isolated_state, model, ircd, allowFrom=[ANN])
        ann = people["ann"] = IrcUser(ircd.port, "ann")
        with GatewayProcess(isolated_state) as gateway:
            ann.wait_for(lambda: _whois_finds(ann, BOT), what="the bot online")
            ann.say(BOT, "are you there?")
            wait_until(first_call.is_set, what="the first model request")
            gateway.stop(signal.SIGKILL)
        assert ann.received(sender=BOT) == []
        with GatewayProcess(isolated_state):
            # The server may not have dropped the killed connection yet: then the bot
            # answers as nodbot_ and takes its nick back later.
            ann.wait_for(lambda: ann.received())
        assert ann.received() == ["the answer"]
        assert model_user_texts(model)[-1] == "are you there?"
        assert len(model.requests) == 2


def _whois_finds(user: IrcUser, nick: str) -> bool:
    before = len(user.lines)
    user.send(f"ISON {nick}")
    wait_until(lambda: any(" 303 " in line for line in user.lines[before:]), what="ISON reply")
    return any(" 303 " in line and nick in line.split(":", 2)[-1] for line in user.lines[before:])


def test_doctor_connects_to_the_network_and_status_shows_the_channel(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer
) -> None:
    _config(isolated_state, model, ircd)
    doctor = run_nodmix(isolated_state, "doctor")
    assert f"channel irc: connected as {BOT} on 127.0.0.1:{ircd.port}" in doctor.stdout
    _config(isolated_state, model, ircd, port=ircd.port + 1 if ircd.port < 65535 else 1)
    doctor = run_nodmix(isolated_state, "doctor")
    assert "channel irc" in doctor.stdout and "check channels.irc" in doctor.stdout
    listed = run_nodmix(isolated_state, "channels", "list")
    assert "irc  enabled  dm: pairing  groups: allowlist (1 listed)" in listed.stdout


def test_tls_connects_when_the_certificate_is_trusted_and_refuses_when_it_is_not(
    isolated_state: Path,
    tmp_path: Path,
    model: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "tls").mkdir()
    server = Ngircd(tmp_path / "tls", tls=True)
    assert server.tls_port is not None
    server.start()
    try:
        write_config(
            isolated_state,
            model.base_url,
            {
                "irc": {
                    "host": "127.0.0.1",
                    "port": server.tls_port,
                    "nick": BOT,
                    "allowFrom": [ANN],
                }
            },
        )
        doctor = run_nodmix(isolated_state, "doctor")
        assert "channel irc" in doctor.stdout and "CERTIFICATE_VERIFY_FAILED" in doctor.stdout
        monkeypatch.setenv("SSL_CERT_FILE", str(server.cert))
        with _gateway() as gateway:
            wait_until(lambda: gateway.runtime.channels.statuses["irc"].connected, what="TLS")
            ann = IrcUser(server.port, "ann")
            try:
                ann.say(BOT, "over TLS")
                ann.wait_for(lambda: ann.received(sender=BOT))
            finally:
                ann.close()
        assert ann.received(sender=BOT) == ["over TLS"]
    finally:
        server.stop()


def test_chat_commands_work_by_private_message_and_by_addressing_the_bot(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer, people: dict[str, IrcUser]
) -> None:
    _config(isolated_state, model, ircd, allowFrom=[ANN], ownerIds=[ANN])
    ann = people["ann"] = IrcUser(ircd.port, "ann")
    ann.join(ROOM)
    with _gateway():
        ann.wait_for(lambda: _bot_in_room(ann), what="the bot joined")
        ann.say(BOT, "/status")  # what `/msg nodbot /status` sends
        ann.wait_for(lambda: ann.received(target="ann", sender=BOT))
        ann.say(ROOM, f"{BOT}: /status")
        ann.wait_for(lambda: ann.received(target=ROOM, sender=BOT))
    assert "agent:main:main" in ann.received(target="ann", sender=BOT)[0]
    assert f"agent:main:irc:group:{ROOM}" in " ".join(ann.received(target=ROOM, sender=BOT))
    assert model.requests == []


def test_message_send_from_the_shell_reaches_an_allowed_nick_only(
    isolated_state: Path, ircd: Ngircd, model: ScriptedModelServer, people: dict[str, IrcUser]
) -> None:
    gone = "zed!~zed@127.0.0.1"
    _config(isolated_state, model, ircd, allowFrom=[ANN, gone])
    ann = people["ann"] = IrcUser(ircd.port, "ann")
    sent = run_nodmix(isolated_state, "message", "send", "--channel", "irc", "--to", ANN, "hi")
    assert sent.returncode == 0, sent.stderr
    ann.wait_for(lambda: ann.received(sender=BOT))
    assert ann.received(sender=BOT) == ["hi"]
    refused = run_nodmix(isolated_state, "message", "send", "--channel", "irc", "--to", "bob", "x")
    assert refused.returncode != 0 and "not allowed" in refused.stderr
    offline = run_nodmix(isolated_state, "message", "send", "--channel", "irc", "--to", gone, "x")
    assert offline.returncode == 1
    assert offline.stderr.splitlines()[-1] == (
        f"nodmix: error: irc: not sent to {gone}: zed is not online, not {gone}: reply withheld"
    )
