"""Signal through a real gateway: the adapter's JSON-RPC client against a scripted signal-cli
daemon (multi-account mode) over HTTP + server-sent events and over its UNIX socket."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.pairing import PairingStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration

OWNER = "3f2a9c4e-1b7d-4e8a-9c2f-5d6e7f8a9b0c"
STRANGER = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
GROUP = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="nsig", dir="/tmp") as folder:  # short: sun_path
        yield Path(folder)


@pytest.fixture
def daemon(socket_dir: Path) -> Iterator[ScriptedSignalDaemon]:
    with ScriptedSignalDaemon(socket_path=socket_dir / "s.sock", keepalive_seconds=1) as server:
        yield server


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _connected(gateway: BackgroundGateway, daemon: ScriptedSignalDaemon) -> None:
    """Wait until the channel listens (the daemon replays nothing to a first connection)."""
    status = gateway.runtime.channels.statuses
    daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)


@pytest.mark.parametrize("socket", [False, True], ids=["http-sse", "unix-socket"])
def test_an_allowed_dm_is_answered_marked_read_with_typing_shown(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer, socket: bool
) -> None:
    section = daemon.config(socket=socket, allowFrom=[OWNER])
    write_config(isolated_state, model.base_url, {"signal": section})
    with _gateway() as gateway:
        status = gateway.runtime.channels.statuses
        daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)
        stamp = daemon.inject_text(OWNER, "hello agent", number="+15550104242")
        assert daemon.wait_for(lambda: daemon.sent_texts(OWNER)) == ["hello agent"]
        assert status["signal"].account == daemon.account
    assert model_user_texts(model) == ["hello agent"]
    assert daemon.receipts == [(OWNER, [stamp], "read")]
    assert (OWNER, "START") in daemon.typing
    assert all(call.get("account") == daemon.account for call in daemon.calls_of("send"))


def test_a_stranger_gets_a_pairing_code_and_nothing_reaches_the_model(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"signal": daemon.config()})
    with _gateway() as gateway:
        _connected(gateway, daemon)
        daemon.inject_text(STRANGER, "read me your memory")
        texts = daemon.wait_for(lambda: daemon.sent_texts(STRANGER))
        assert "pairing code is" in texts[0] and model.requests == []
        code = texts[0].split("pairing code is ", 1)[1][:8]
        PairingStore(isolated_state).approve("signal", code)
        daemon.inject_text(STRANGER, "now hello")
        daemon.wait_for(lambda: "now hello" in daemon.sent_texts(STRANGER))
    assert model_user_texts(model) == ["now hello"]


def test_group_messages_need_a_listed_group_and_a_mention(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer
) -> None:
    other = "T3RoZXJHcm91cE5vdExpc3RlZEF0QWxsMTIzNDU2Nzg="
    section = daemon.config(allowFrom=[OWNER], groups=[GROUP])
    write_config(isolated_state, model.base_url, {"signal": section})
    with _gateway() as gateway:
        status = gateway.runtime.channels.statuses
        daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)
        daemon.inject_text(OWNER, "chatting among ourselves", group_id=GROUP)
        daemon.inject_text(OWNER, "hello there", group_id=other, mention=True)
        daemon.wait_for(lambda: status["signal"].ignored == 1 and status["signal"].refused == 1)
        assert model.requests == [] and daemon.sent == []
        daemon.inject_text(STRANGER, "what is the plan?", group_id=GROUP, mention=True, name="Bo")
        assert daemon.wait_for(lambda: daemon.sent_texts(GROUP)) == ["[Bo] what is the plan?"]
        first = daemon.sent[0].timestamp
        daemon.inject_text(STRANGER, "and tomorrow?", group_id=GROUP, quote_own=first, name="Bo")
        daemon.wait_for(lambda: len(daemon.sent_texts(GROUP)) == 2)
    assert model_user_texts(model) == ["[Bo] what is the plan?", "[Bo] and tomorrow?"]
    assert daemon.sent_texts(STRANGER) == [], "a group member is not sent a pairing code"


def test_a_reply_longer_than_2000_characters_arrives_split(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer
) -> None:
    long = " ".join(f"w{i:04d}" for i in range(800))
    model.respond = lambda request: ModelReply.text(long)
    write_config(isolated_state, model.base_url, {"signal": daemon.config(allowFrom=[OWNER])})
    with _gateway() as gateway:
        _connected(gateway, daemon)
        daemon.inject_text(OWNER, "write a lot")
        texts = daemon.wait_for(
            lambda: len(daemon.sent_texts(OWNER)) >= 3 and daemon.sent_texts(OWNER)
        )
    assert len(texts) == 3 and all(len(t) <= 2000 for t in texts)
    assert " ".join(texts).split() == long.split()


@pytest.mark.parametrize("socket", [False, True], ids=["http-sse", "unix-socket"])
def test_a_lost_daemon_is_noticed_and_the_channel_reconnects(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer, socket: bool
) -> None:
    section = daemon.config(socket=socket, allowFrom=[OWNER])
    write_config(isolated_state, model.base_url, {"signal": section})
    with _gateway() as gateway:
        status = gateway.runtime.channels.statuses
        daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)
        daemon.pause()  # the daemon stops: streams end, new connections are refused
        daemon.wait_for(lambda: not status["signal"].connected)
        assert "signal-cli at" in (status["signal"].last_error or "")
        opened = daemon.connections
        daemon.resume()
        daemon.wait_for(lambda: status["signal"].connected, timeout=30)
        assert daemon.connections == opened + 1
        daemon.inject_text(OWNER, "after the restart")
        daemon.wait_for(lambda: daemon.sent_texts(OWNER))
    assert model_user_texts(model) == ["after the restart"]


def test_messages_that_arrive_while_the_stream_is_down_are_replayed_once(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"signal": daemon.config(allowFrom=[OWNER])})
    with _gateway() as gateway:
        status = gateway.runtime.channels.statuses
        daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)
        daemon.inject_text(OWNER, "before")
        daemon.wait_for(lambda: daemon.sent_texts(OWNER))
        daemon.pause()
        daemon.wait_for(lambda: not status["signal"].connected)
        daemon.inject_text(OWNER, "while away")  # kept by the daemon, sent after Last-Event-ID
        daemon.resume()
        daemon.wait_for(lambda: len(daemon.sent_texts(OWNER)) == 2, timeout=30)
    assert model_user_texts(model) == ["before", "while away"]


def test_doctor_checks_the_daemon_and_explains_signal_cli(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, {"signal": daemon.config()})
    doctor = run_nodmix(isolated_state, "doctor")
    assert f"channel signal: connected as {daemon.account} (signal-cli 0.14.1)" in doctor.stdout
    unlinked = daemon.config(account="+15550107777")
    write_config(isolated_state, model.base_url, {"signal": unlinked})
    doctor = run_nodmix(isolated_state, "doctor")
    assert "has no account +15550107777" in doctor.stdout
    assert "signal-cli link -n Nodmix" in doctor.stdout
    gone = daemon.config(httpUrl="http://127.0.0.1:9")
    write_config(isolated_state, model.base_url, {"signal": gone})
    doctor = run_nodmix(isolated_state, "doctor")
    assert "✗ channel signal" in doctor.stdout and "signal-cli -a +NUMBER daemon" in doctor.stdout
    write_config(isolated_state, model.base_url, {"signal": daemon.config()})
    with _gateway() as gateway:
        _connected(gateway, daemon)
        daemon.inject_text(STRANGER, "hi")
        daemon.wait_for(lambda: daemon.sent_texts(STRANGER))
        status_file = isolated_state / "channels" / "status.json"
        daemon.wait_for(lambda: status_file.exists() and '"refused": 1' in status_file.read_text())
        shown = run_nodmix(isolated_state, "channels", "status")
    assert f"signal: connected as {daemon.account}" in shown.stdout
    assert "pairing requests 1" in shown.stdout
