"""The Discord adapter against the scripted Discord server, without a gateway: a call that is
cancelled while its request is in flight (the typing indicator when a turn ends) leaves the
adapter able to send at once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from nodmix.channels.discord.adapter import DiscordAdapter, DiscordSettings
from nodmix.channels.types import OutboundMessage
from nodmix.testing.discord_server import ScriptedDiscord

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

USER = "31337"
DEADLINE_S = 10.0
"""Far below the 30 s that a spent rate-limit bucket held every later call of its route."""


@pytest.fixture
def discord() -> Iterator[ScriptedDiscord]:
    with ScriptedDiscord() as server:
        yield server


async def _until(check: Callable[[], object], what: str) -> None:
    try:
        with anyio.fail_after(DEADLINE_S):
            while not check():
                await anyio.sleep(0.02)  # polling the scripted server's record, with a deadline
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_a_reply_goes_out_at_once_after_typing_was_cancelled_mid_request(
    discord: ScriptedDiscord, tmp_path: Path
) -> None:
    adapter = DiscordAdapter(
        DiscordSettings(token=discord.token, api_base_url=discord.api_url), tmp_path
    )
    try:
        # The typing indicator looks the user's DM channel up; Discord keeps that request
        # waiting ("retry after 5 s") and the turn ends meanwhile, cancelling the typing.
        discord.fail_next("GET /channels/{id}", retry_after=5.0)
        async with anyio.create_task_group() as group:
            group.start_soon(adapter.typing, USER, None)
            await _until(lambda: discord.calls_of("GET /channels/{id}"), "the channel lookup")
            group.cancel_scope.cancel()

        # The reply looks the same channel up again (the same rate-limit bucket).
        with anyio.fail_after(DEADLINE_S):
            await adapter.send(OutboundMessage(chat_id=USER, text="the answer"))
        assert discord.sent_texts(discord.dm_channel(USER)) == ["the answer"]
    finally:
        await adapter.aclose()
