"""The seam channels plug into, with a real runtime and the scripted model server: a turn from
a channel asks through the presenter registered for that channel, and `/approve <id>` or
`/deny <id>` sent in the same session answers it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.config.loader import load_config
from nodmix.origin import TurnOrigin
from nodmix.runtime import CommandOutcome, Runtime, TurnOutcome
from nodmix.security.approvals import RecordingPresenter
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import NO_RETRY, poll_until, write_config
from tests.security.support import shell_model

pytestmark = pytest.mark.anyio

TELEGRAM = TurnOrigin(channel="telegram", chat_id="chat-42", owner=True)
"""The owner's chat: only the owner answers approval requests (`channels.<id>.ownerIds`)."""


@pytest.fixture
def server(isolated_state: Path) -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(shell_model) as running:
        write_config(isolated_state, running.base_url)  # no exec policy: the defaults apply
        yield running


async def _channel_turn(command: str, answer: str) -> tuple[str, str, Any]:
    """Run `run <command>` from the channel, answer with `answer <id>`; (reply, ack, batch)."""
    env = dict(os.environ)
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        presenter = RecordingPresenter()
        runtime.security.broker.router.register("channel:telegram", presenter)
        outcome: dict[str, Any] = {}

        async def turn() -> None:
            outcome["turn"] = await runtime.submit(
                f"run {command}", session_key="telegram-42", origin=TELEGRAM
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(turn)

            async def asked() -> bool:
                return bool(presenter.batches)

            await poll_until(asked, what="the channel's approval request")
            request = presenter.batches[0].requests[0]
            ack = await runtime.submit(
                f"{answer} {request.id}", session_key="telegram-42", origin=TELEGRAM
            )
        result = outcome["turn"]
        assert isinstance(result, TurnOutcome) and isinstance(ack, CommandOutcome)
        return result.result.reply, ack.message, presenter.batches[0]


async def test_a_channel_turn_asks_on_its_channel_and_approve_runs_the_command(
    server: ScriptedModelServer,
) -> None:
    reply, ack, batch = await _channel_turn("echo from-telegram", "/approve")
    request = batch.requests[0]
    assert request.origin == TELEGRAM and request.session_key == "agent:main:telegram-42"
    assert request.reason == "the command is not on the exec allowlist"
    assert ack == "Approved: echo from-telegram"
    assert reply.startswith("tool said: from-telegram")


async def test_deny_from_the_channel_refuses_and_the_model_reads_a_clear_refusal(
    server: ScriptedModelServer, isolated_state: Path
) -> None:
    marker = isolated_state / "telegram-marker"
    reply, ack, _ = await _channel_turn(f"touch {marker}", "/deny")
    assert ack == f"Denied: touch {marker}"
    assert reply.startswith("tool said: Not run: the user denied this command (chat /deny)")
    assert not marker.exists()


async def test_the_owner_cli_keeps_running_commands_without_asking(
    server: ScriptedModelServer,
) -> None:
    env = dict(os.environ)
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        presenter = RecordingPresenter()
        runtime.security.broker.router.register("owner", presenter)
        outcome = await runtime.submit("run echo owner")
    assert isinstance(outcome, TurnOutcome)
    assert outcome.result.reply.startswith("tool said: owner")
    assert presenter.batches == []


async def test_approve_commands_only_answer_requests_of_their_own_session(
    server: ScriptedModelServer,
) -> None:
    env = dict(os.environ)
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        presenter = RecordingPresenter()
        runtime.security.broker.router.register("channel", presenter)
        async with anyio.create_task_group() as tg:

            async def turn() -> None:
                await runtime.submit("run echo x", session_key="victim", origin=TELEGRAM)

            tg.start_soon(turn)

            async def asked() -> bool:
                return bool(presenter.batches)

            await poll_until(asked, what="the approval request")
            request_id = presenter.batches[0].requests[0].id
            other = await runtime.submit(f"/approve {request_id}", session_key="intruder")
            listing = await runtime.submit("/approve", session_key="victim")
            assert isinstance(other, CommandOutcome) and isinstance(listing, CommandOutcome)
            assert (
                other.message == f"No approval request {request_id!r} is waiting in this session."
            )
            assert f"{request_id}: echo x" in listing.message
            huge = await runtime.submit("/approve " + "x" * 10_000, session_key="victim")
            assert isinstance(huge, CommandOutcome)
            assert "(10000 characters)" in huge.message and len(huge.message) < 200
            runtime.security.broker.resolve(request_id, "deny")
