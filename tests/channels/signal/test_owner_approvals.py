"""A Signal group member asks the agent for a shell command and then answers its approval
request herself (`/approve`, `/always`, `/deny`, mentioning the account): against the scripted
signal-cli daemon and a real gateway. Each answer is refused with one line; nothing runs."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.signal_daemon import ScriptedSignalDaemon
from tests.channels.support import chat_model, write_config
from tests.channels.test_owner_approvals_everywhere import _attack, _command

pytestmark = pytest.mark.integration

OWNER = "3f2a9c4e-1b7d-4e8a-9c2f-5d6e7f8a9b0c"
MEMBER = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
GROUP = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(chat_model) as server:
        yield server


def test_a_group_member_cannot_answer_an_approval_request(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    command, marker = _command(isolated_state)
    with (
        tempfile.TemporaryDirectory(prefix="nsig", dir="/tmp") as folder,
        ScriptedSignalDaemon(socket_path=Path(folder) / "s.sock") as daemon,
    ):
        section = daemon.config(allowFrom=[OWNER], ownerIds=[OWNER], groups=[GROUP])
        write_config(isolated_state, model.base_url, {"signal": section})
        settings = GatewaySettings(port=0, token=None)
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)) as gateway:
            status = gateway.runtime.channels.statuses
            daemon.wait_for(lambda: status.get("signal") and status["signal"].connected)
            _attack(
                "signal",
                lambda text: daemon.inject_text(MEMBER, text, group_id=GROUP, mention=True),
                lambda: daemon.sent_texts(GROUP),
                model,
                marker,
                command,
            )
