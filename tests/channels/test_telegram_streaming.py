"""Replies streamed by editing the message (`streaming: "edit"`), through a real gateway: a
scripted model that streams slowly, python-telegram-bot against the scripted Bot API (which
keeps what each message shows after its edits, and refuses edits as Telegram does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.channels.chunking import split_text
from nodmix.channels.streaming import EDIT_EVERY_SECONDS
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.channels.support import write_channel_config

pytestmark = pytest.mark.integration

OWNER = 4242
PAUSE = 0.6
"""Seconds between the model's stream events: its three text chunks span more than a second
each way, so the reply shows in stages."""


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def _long_reply() -> str:
    words = " ".join(f"word{i:04d}" for i in range(100))  # about 900 characters
    code = "".join(f"value_{i:03d} = compute({i})\n" for i in range(170))  # about 4,400
    return f"{words}\n\n```python\n{code}```\n\n{words[:300].upper()}"


def _streaming_config(state: Path, model: ScriptedModelServer, api: ScriptedBotAPI) -> None:
    write_channel_config(
        state, model.base_url, api, {"allowFrom": [OWNER], "streaming": "edit", "typing": False}
    )


def test_a_streamed_reply_grows_by_throttled_edits_and_ends_as_the_usual_messages(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    reply = _long_reply()
    expected = split_text(reply, 4096)
    assert len(expected) == 2 and expected[1].startswith("```python\n")  # cut inside the code
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=PAUSE) as model:
        _streaming_config(isolated_state, model, api)
        with _gateway():
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="write code")
            api.wait_for(lambda: api.message_texts(OWNER) == expected, timeout=30)
    sends, edits = api.calls_of("sendMessage"), api.calls_of("editMessageText")
    assert len(sends) == 2, "the overflow went to one new message, nothing twice"
    assert len(edits) >= 2
    assert len(str(sends[0].params["text"])) < len(expected[0]), "the first words went early"
    assert all(len(str(c.params["text"])) <= 4096 for c in sends + edits)
    updates = sorted(c.at for c in sends + edits)
    gaps = [b - a for a, b in zip(updates, updates[1:], strict=False)]
    assert min(gaps) > EDIT_EVERY_SECONDS * 0.8, "at most one update per second in the chat"


@pytest.mark.parametrize(
    ("status", "description", "retry_after"),
    [
        (400, "Bad Request: message can't be edited", None),
        (429, "Too Many Requests: retry after 5", 5),
    ],
)
def test_when_an_edit_is_refused_the_rest_of_the_reply_comes_as_a_new_message(
    isolated_state: Path,
    api: ScriptedBotAPI,
    status: int,
    description: str,
    retry_after: int | None,
) -> None:
    reply = "A" * 300 + "B" * 300 + "C" * 300  # streamed in three chunks
    api.fail_next(
        "editMessageText", status=status, description=description, retry_after=retry_after
    )
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=PAUSE) as model:
        _streaming_config(isolated_state, model, api)
        with _gateway():
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="go")
            api.wait_for(lambda: "".join(api.message_texts(OWNER)) == reply, timeout=30)
            shown = api.message_texts(OWNER)
    assert len(shown) == 2 and reply.startswith(shown[0]) and shown[0]
    assert len(api.calls_of("editMessageText")) == 1, "no edit after the refused one"


def test_each_model_step_starts_the_text_afresh_and_the_last_edit_is_the_reply(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        if len(request.messages) == 1:
            return ModelReply.tool_call("no_such_tool", {}, text="Let me look that up first.")
        return ModelReply.text("The answer is 42.")

    with ScriptedModelServer(respond, event_seconds=PAUSE) as model:
        _streaming_config(isolated_state, model, api)
        with _gateway():
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="question")
            api.wait_for(lambda: api.message_texts(OWNER) == ["The answer is 42."], timeout=30)
    assert api.sent_texts(OWNER)[0] != "The answer is 42.", "the first step's words showed first"
    assert len(api.calls_of("sendMessage")) == 1


def test_a_turn_that_fails_mid_stream_keeps_what_streamed_and_says_it_failed(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    partial = "The first part of the answer"
    failing = ModelError(400, "the model broke", partial=partial)
    with ScriptedModelServer(lambda r: failing, event_seconds=PAUSE) as model:
        _streaming_config(isolated_state, model, api)
        with _gateway():
            api.inject_text(chat_id=OWNER, sender_id=OWNER, text="go")
            texts = api.wait_for(
                lambda: len(api.message_texts(OWNER)) >= 2 and api.message_texts(OWNER), timeout=12
            )
    assert texts[0] == partial
    assert texts[1].startswith("Sorry, that failed")
