"""A streamed reply's text as it grows: a long reply in tiny deltas is kept whole, and a new
model step starts it afresh (the turn's side of `EditStream`, which must never block)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nodmix.channels.status import ChannelStatus
from nodmix.channels.streaming import EditStream, EditThrottle
from nodmix.channels.telegram.adapter import TelegramAdapter, TelegramSettings
from nodmix.testing.telegram_server import ScriptedBotAPI

#: The provider's default output cap (`providers.limits`): the longest text one step streams.
_REPLY_BYTES = 1 << 20


def _stream(tmp_path: Path) -> EditStream:
    # Nothing is sent: only the turn's side is driven (the adapter is never connected).
    adapter = TelegramAdapter(
        TelegramSettings(token="1:x", api_base_url="http://127.0.0.1:9"), tmp_path
    )
    return EditStream(
        adapter,
        adapter,
        EditThrottle(),
        ChannelStatus(channel="telegram"),
        chat_id="42",
        thread_id=None,
    )


def test_a_megabyte_reply_in_four_byte_deltas_is_streamed_whole(tmp_path: Path) -> None:
    stream = _stream(tmp_path)
    deltas = [f"{i % 10000:04d}" for i in range(_REPLY_BYTES // 4)]
    for delta in deltas:
        stream.text(delta)
    assert stream.streamed == "".join(deltas)
    stream.text("!")
    assert stream.streamed == "".join(deltas) + "!"


def test_text_after_a_step_ends_replaces_the_step_before(tmp_path: Path) -> None:
    stream = _stream(tmp_path)
    assert stream.streamed == ""
    stream.text("Let me look ")
    stream.text("that up.")
    stream.step_end()
    assert stream.streamed == "Let me look that up."
    stream.text("It is ")
    stream.text("42.")
    assert stream.streamed == "It is 42."


@pytest.mark.anyio
async def test_a_send_the_platform_keeps_refusing_does_not_hold_up_the_turns_end(
    tmp_path: Path,
) -> None:
    with ScriptedBotAPI() as api:
        adapter = TelegramAdapter(TelegramSettings(token=api.token, api_base_url=api.url), tmp_path)
        stream = EditStream(
            adapter,
            adapter,
            EditThrottle(0.0),
            ChannelStatus(channel="telegram"),
            chat_id="42",
            thread_id=None,
            send_wait_seconds=1.0,
        )
        # Flood control: every attempt is refused with "retry after 5 s" (3 attempts: 10 s).
        api.fail_next("sendMessage", retry_after=5, times=3)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(stream.run)
                stream.text("hello")
                with anyio.fail_after(10):
                    while not api.calls_of("sendMessage"):
                        await anyio.sleep(0.02)  # polling the server's record, with a deadline
                group.cancel_scope.cancel()  # the turn ended
            assert len(api.calls_of("sendMessage")) == 1  # given up during the first wait
            assert not await stream.complete("hello", failed=False)  # the usual delivery sends it
        finally:
            await adapter.aclose()
