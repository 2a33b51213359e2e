"""Signal replies reach the chat they answer, whatever its id looks like: against a scripted
signal-cli daemon and a real gateway. A group id is base64, whose alphabet has `+`, so one
group in 64 has an id that starts like a phone number."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from tests.channels.support import write_config

pytestmark = pytest.mark.integration

OWNER = "3f2a9c4e-1b7d-4e8a-9c2f-5d6e7f8a9b0c"
PLUS_GROUP = "+mpiAEfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="


@pytest.fixture
def daemon() -> Iterator[ScriptedSignalDaemon]:
    with tempfile.TemporaryDirectory(prefix="nsig", dir="/tmp") as folder:
        path = Path(folder) / "s.sock"
        with ScriptedSignalDaemon(socket_path=path, keepalive_seconds=1) as server:
            yield server


def test_a_reply_to_a_group_whose_id_starts_with_a_plus_goes_to_the_group(
    isolated_state: Path, daemon: ScriptedSignalDaemon, model: ScriptedModelServer
) -> None:
    section = daemon.config(allowFrom=[OWNER], groups=[PLUS_GROUP])
    write_config(isolated_state, model.base_url, {"signal": section})
    gateway = BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))
    with gateway:
        status = gateway.runtime.channels.statuses
        daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)
        daemon.inject_text(OWNER, "plans for today?", group_id=PLUS_GROUP, mention=True)
        daemon.wait_for(lambda: daemon.calls_of("send"))
    (call,) = daemon.calls_of("send")
    assert call.get("groupId") == PLUS_GROUP and "recipient" not in call
    assert daemon.sent_texts(PLUS_GROUP) == ["[Ann] plans for today?"]
