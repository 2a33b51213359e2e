"""A real `nodmix gateway` process killed with SIGKILL while connected to signal-cli's HTTP
event stream: messages that reach the daemon while the gateway is down are delivered when it
comes back (the stream resumes from the last event the gateway handed on, which survives the
restart), and none is answered twice."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from tests.channels.support import model_user_texts, write_config
from tests.gateway.support import GatewayProcess

pytestmark = pytest.mark.integration

OWNER = "3f2a9c4e-1b7d-4e8a-9c2f-5d6e7f8a9b0c"


def test_messages_sent_while_the_gateway_was_killed_are_answered_after_the_restart(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(echo) as model, ScriptedSignalDaemon(keepalive_seconds=1) as daemon:
        write_config(isolated_state, model.base_url, {"signal": daemon.config(allowFrom=[OWNER])})
        with GatewayProcess(isolated_state) as gateway:
            daemon.wait_for(lambda: daemon.connections >= 1)
            daemon.inject_text(OWNER, "before")
            daemon.wait_for(lambda: daemon.sent_texts(OWNER))
            # Killed once the answer is on record (a kill between sending a reply and
            # recording it sends the reply again after the restart: at least once).
            answered = isolated_state / "channels" / "signal" / "answered.json"
            daemon.wait_for(answered.exists)
            gateway.stop(signal.SIGKILL)
        daemon.inject_text(OWNER, "while you were down")
        with GatewayProcess(isolated_state):
            daemon.wait_for(lambda: len(daemon.sent_texts(OWNER)) >= 2, timeout=30)
            daemon.inject_text(OWNER, "after")
            daemon.wait_for(lambda: len(daemon.sent_texts(OWNER)) >= 3, timeout=30)
        assert daemon.sent_texts(OWNER) == ["before", "while you were down", "after"]
        assert model_user_texts(model) == ["before", "while you were down", "after"]


def test_the_answer_is_on_record_before_the_spoken_reply_is_made(isolated_state: Path) -> None:
    import threading

    import anyio

    from nodmix.channels.types import InboundMessage
    from nodmix.gateway import BackgroundGateway, GatewaySettings
    from nodmix.providers.retry import RetryPolicy

    speaking = threading.Event()
    release = threading.Event()

    class SlowVoice:
        """A spoken reply that takes its time (synthesis, an upload)."""

        async def after_reply(self, msg: InboundMessage, reply: str) -> None:
            speaking.set()
            while not release.is_set():
                await anyio.sleep(0.02)

    with ScriptedModelServer(echo) as model, ScriptedSignalDaemon(keepalive_seconds=1) as daemon:
        write_config(isolated_state, model.base_url, {"signal": daemon.config(allowFrom=[OWNER])})
        settings = GatewaySettings(port=0, token=None)
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
            gateway.runtime.channels.voice = SlowVoice()
            daemon.wait_for(lambda: daemon.connections >= 1)
            daemon.inject_text(OWNER, "say it")
            daemon.wait_for(speaking.is_set)
            try:
                # A crash now must not send "say it" again after the restart.
                pending = isolated_state / "channels" / "signal" / "pending"
                assert not pending.exists() or not any(pending.iterdir())
            finally:
                release.set()


def test_a_message_answered_just_before_a_crash_is_not_answered_again(
    isolated_state: Path,
) -> None:
    from nodmix.channels.delivery import DeliveryLog
    from nodmix.channels.types import InboundMessage
    from nodmix.gateway import BackgroundGateway, GatewaySettings
    from nodmix.providers.retry import RetryPolicy

    # The state a crash leaves between recording the answer and removing the pending file.
    msg = InboundMessage(
        channel="signal", chat_type="dm", chat_id=OWNER, message_id="1700000000000",
        sender_id=OWNER, text="answered already",
    )  # fmt: skip
    log = DeliveryLog(isolated_state, "signal")
    assert log.accept(msg)
    (pending,) = log.pending_dir.iterdir()
    kept = pending.read_bytes()
    log.done(msg)
    pending.write_bytes(kept)

    with ScriptedModelServer(echo) as model, ScriptedSignalDaemon(keepalive_seconds=1) as daemon:
        write_config(isolated_state, model.base_url, {"signal": daemon.config(allowFrom=[OWNER])})
        settings = GatewaySettings(port=0, token=None)
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)):
            daemon.wait_for(lambda: daemon.connections >= 1)
            daemon.inject_text(OWNER, "after")  # same sender: queued behind any rerun
            daemon.wait_for(lambda: "after" in daemon.sent_texts(OWNER))
        assert daemon.sent_texts(OWNER) == ["after"]
    assert not any(log.pending_dir.iterdir())
