"""What the Google Chat app sends: long replies split at Chat's 4096 characters, replies
streamed by patching the message, a Chat API that fails for a while (retried, noticed,
recovered), replies that mention no one, and attachments under the cap (its tokens:
`test_webhook_tokens.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.channels.chunking import split_text
from nodmix.providers.fake import ModelReply
from nodmix.testing.googlechat_payloads import ChatUser, uploaded_attachment
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.channels.support import model_user_texts
from tests.channels.webhooks import start_chat

pytestmark = pytest.mark.integration

ANN = ChatUser("ann")
DM = ANN.dm_space


def _long_reply() -> str:
    words = " ".join(f"word{i:04d}" for i in range(400))  # about 3,600 characters
    code = "".join(f"value_{i:03d} = compute({i})\n" for i in range(170))  # about 4,400
    return f"{words}\n\n```python\n{code}```\n\ndone"


def test_a_reply_over_4096_characters_arrives_split_and_streamed_by_patches(
    isolated_state: Path, chat: ScriptedChat
) -> None:
    reply = _long_reply()
    expected = split_text(reply, 4096)
    assert len(expected) >= 2
    with ScriptedModelServer(lambda r: ModelReply.text(reply), event_seconds=0.6) as model:
        gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN.id], streaming="edit")
        try:
            chat.send("write code", user=ANN)
            chat.wait_for(lambda: chat.texts(DM) == expected, timeout=40)
        finally:
            gateway.__exit__(None, None, None)
    posted = chat.messages(DM)
    assert sum(p.edits for p in posted) >= 1, "the first message grew by patches"
    assert len(posted) == len(expected) and chat.refused_calls == []


def test_a_failing_chat_api_is_retried_then_noticed_and_recovered_from(
    isolated_state: Path, chat: ScriptedChat
) -> None:
    with ScriptedModelServer(echo) as model:
        gateway = start_chat(isolated_state, model, chat, allowFrom=[ANN.id])
        try:
            status = gateway.runtime.channels.statuses["googlechat"]
            chat.fail_next(2, 500)
            chat.send("first", user=ANN)
            chat.wait_for(lambda: chat.texts(DM) == ["first"])  # after two retries
            chat.fail_next(3, 503)
            chat.send("lost", user=ANN)
            chat.wait_for(lambda: not status.connected)
            assert "503" in (status.last_error or "")
            chat.send("third", user=ANN)
            chat.wait_for(lambda: chat.texts(DM) == ["first", "third"])
            assert status.connected
        finally:
            gateway.__exit__(None, None, None)


def test_a_reply_mentions_no_one_and_attachments_respect_the_cap(
    isolated_state: Path, chat: ScriptedChat
) -> None:
    reply = "Tell <users/all> and <users/123> about **this** [page](https://example.org)"
    chat.files["res-notes"] = b"ferry at 9:40\n"
    chat.files["res-big"] = b"\0" * 30_000
    with ScriptedModelServer(lambda r: ModelReply.text(reply)) as model:
        gateway = start_chat(
            isolated_state, model, chat, allowFrom=[ANN.id], maxAttachmentBytes=20_000
        )
        try:
            event = chat.event("read this", user=ANN)
            name = event["message"]["name"]
            files = [uploaded_attachment(name, "res-notes", "notes.txt", "text/plain")]
            event["message"]["attachment"] = files
            assert chat.post(event) == 200
            chat.wait_for(lambda: chat.texts(DM))
            big = chat.event("and this", user=ANN)
            big["message"]["attachment"] = [
                uploaded_attachment(big["message"]["name"], "res-big", "big.bin", "x/y")
            ]
            assert chat.post(big) == 200
            chat.wait_for(lambda: len(chat.texts(DM)) == 2)
        finally:
            gateway.__exit__(None, None, None)
    first = chat.texts(DM)[0]
    assert "<users/" not in first and "<\u200busers/all>" in first
    assert "*this*" in first and "<https://example.org|page>" in first
    saved = sorted(p.name for p in (isolated_state / "workspace" / "inbox").iterdir())
    assert len(saved) == 1 and saved[0].endswith("notes.txt")
    assert "larger than" in chat.texts(DM)[1]
    assert len(model_user_texts(model)) == 1
