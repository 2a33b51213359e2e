"""The agent's `cron` tool in real turns: the same validation as the CLI, delivery only to
chats the agent may message, list and remove."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.automation.clock import SystemClock
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import open_runner, telegram_section, write_config

pytestmark = pytest.mark.anyio


class CallsCron:
    """Calls `cron` with each argument set in turn, then answers with the last result."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = calls
        self.results: list[tuple[bool, str]] = []

    def __call__(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            self.results.append((last.is_error, last.text))
            if len(self.results) == len(self.calls):
                return ModelReply.text("done")
        return ModelReply.tool_call("cron", self.calls[len(self.results)])


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


async def test_the_cron_tool_validates_like_the_cli_and_lists_and_removes(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    script = CallsCron(
        [
            {"action": "add", "every": "soon", "message": "x"},
            {"action": "add", "cron": "0 7 * * *", "tz": "Mars/Base", "message": "x"},
            {"action": "add", "in": "1h", "message": "x", "deliver": "telegram:999"},
            {"action": "add", "in": "1h", "message": "x", "deliver": "sms:1"},
            {"action": "add", "every": "1d", "name": "daily", "message": "Plan the day"},
            {"action": "add", "in": "1h", "message": "tea", "deliver": "telegram:4242"},
            {"action": "list"},
            {"action": "remove", "id": "daily"},
            {"action": "remove", "id": "daily"},
        ]
    )
    async with ScriptedModelServer(script) as model:
        channels = telegram_section(api, dmPolicy="allowlist", allowFrom=[4242])
        config = write_config(isolated_state, model.base_url, channels=channels)
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            outcome = await runtime.run_turn("schedule things")
            assert outcome.result.reply == "done"
    # (The OpenAI wire format carries no error flag: the texts tell the outcomes apart.)
    texts = [text for _, text in script.results]
    assert texts[0].startswith("invalid duration 'soon'")
    assert texts[1].startswith("unknown time zone 'Mars/Base'")
    assert texts[2].startswith("telegram chat 999 is not allowed")
    assert texts[3].startswith("channel 'sms' is not configured")
    assert texts[4].startswith("scheduled job") and texts[4].endswith("(daily): every 1d")
    assert texts[5].endswith("result to telegram:4242")
    assert "daily" in texts[6] and "tea" in texts[6]
    assert texts[7].startswith("removed job")
    assert texts[8].startswith("no cron job 'daily'")
    [left] = runner.store.load()
    assert left.message == "tea" and left.created_by == "agent" and left.delete_after_run
    assert api.sent_texts() == []
