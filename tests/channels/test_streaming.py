"""The edit stream against the real Telegram adapter and the scripted Bot API, without a
gateway: what the chat shows when an edit is refused in the middle of a code block."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from nodmix.channels.chunking import split_text
from nodmix.channels.status import ChannelStatus
from nodmix.channels.streaming import EditStream, EditThrottle
from nodmix.channels.telegram.adapter import TelegramAdapter, TelegramSettings
from nodmix.testing.telegram_server import ScriptedBotAPI

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CHAT = 42


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


async def _until(check: Callable[[], object], what: str) -> None:
    with anyio.fail_after(10):
        while not check():
            await anyio.sleep(0.02)  # polling the scripted server's record, with a deadline


def _stream(api: ScriptedBotAPI, state: Path) -> tuple[TelegramAdapter, EditStream]:
    adapter = TelegramAdapter(TelegramSettings(token=api.token, api_base_url=api.url), state)
    status = ChannelStatus(channel="telegram")
    stream = EditStream(
        adapter, adapter, EditThrottle(0.0), status, chat_id=str(CHAT), thread_id=None
    )
    return adapter, stream


async def test_after_a_refused_edit_the_rest_continues_in_a_reopened_code_fence(
    api: ScriptedBotAPI, tmp_path: Path
) -> None:
    head = "Here it is:\n\n```python\n" + "x = 1\n" * 300
    reply = head + "y = 2\n" * 700 + "```\nDone."
    assert len(split_text(reply, 4096)) == 2
    api.fail_next(
        "editMessageText", status=400, description="Bad Request: too old", retry_after=None
    )
    adapter, stream = _stream(api, tmp_path)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(stream.run)
            stream.text(head)
            await _until(lambda: api.message_texts(CHAT), "the first message")
            stream.text(reply[len(head) :])
            await _until(lambda: api.calls_of("editMessageText"), "the refused edit")
            group.cancel_scope.cancel()
        assert await stream.complete(reply, failed=False)
    finally:
        await adapter.aclose()
    shown = api.message_texts(CHAT)
    assert shown[0] == head.strip("\n"), "the refused edit left the first message as it was"
    assert len(shown) == 3 and len(api.calls_of("editMessageText")) == 1
    for text in shown[1:]:
        assert text.startswith("```python\n") and text.count("```") == 2, "fences balanced"
    assert sum(t.count("y = 2") for t in shown) == 700 and "Done." in shown[-1]
    assert sum(t.count("x = 1") for t in shown) == 300, "nothing sent twice"


async def test_a_reply_that_never_streamed_is_left_to_the_usual_delivery(
    api: ScriptedBotAPI, tmp_path: Path
) -> None:
    adapter, stream = _stream(api, tmp_path)
    try:
        stream.text("quick answer")  # arrived, but the turn ended before it was shown
        assert not await stream.complete("quick answer", failed=False)
    finally:
        await adapter.aclose()
    assert api.calls_of("sendMessage") == []
