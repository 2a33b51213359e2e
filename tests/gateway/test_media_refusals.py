"""A request the gateway refuses leaves nothing in the agent's `inbox/`: images of a message too
long for the model's window, or next to an unusable one, are removed again; an image an
earlier, accepted request saved stays. Driven with the official `openai` client against a real
gateway (uvicorn) and the scripted model server."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from nodmix.sessions.store import SessionStore
from nodmix.testing.model_server import ScriptedModelServer
from tests.media.samples import photo

pytestmark = pytest.mark.integration

TOO_BIG = "word " * 40_000  # ~50,000 tokens; the configured model holds 32,000
WITH_TOOLS_TOO_BIG = "word " * 23_500  # ~29,400 tokens (~30,600 with the image): fits alone,
# not with the tool definitions (~1,900) and the system prompt


def _data_url(data: bytes) -> str:
    return f"data:image/jpeg;base64,{base64.b64encode(data).decode()}"


def _picture(width: int) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": _data_url(photo(width, 300))}}


def _inbox(state: Path) -> list[str]:
    inbox = state / "workspace" / "inbox"
    return sorted(p.name for p in inbox.iterdir()) if inbox.exists() else []


@pytest.mark.parametrize("text", [TOO_BIG, WITH_TOOLS_TOO_BIG], ids=["text", "with-tools"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_completion_too_long_for_the_window_leaves_no_image_behind(
    vision_client: openai.OpenAI,
    model_server: ScriptedModelServer,
    isolated_state: Path,
    stream: bool,
    text: str,
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        vision_client.chat.completions.create(
            model="nodmix",
            stream=stream,
            messages=[
                {"role": "user", "content": [{"type": "text", "text": text}, _picture(400)]},
            ],
        )
    assert "context window" in str(refused.value)
    assert model_server.requests == []
    assert _inbox(isolated_state) == []


def _history_and(text: str) -> list[Any]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "old"}, _picture(350)]},
        {"role": "assistant", "content": "an old picture"},
        {"role": "user", "content": [{"type": "text", "text": text}, _picture(400)]},
    ]


def test_a_prompt_too_long_by_itself_is_refused_before_any_history_is_seeded(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer, isolated_state: Path
) -> None:
    with pytest.raises(openai.BadRequestError, match="context window"):
        vision_client.chat.completions.create(
            model="nodmix", user="album", messages=_history_and(TOO_BIG)
        )
    assert _inbox(isolated_state) == []
    sessions = isolated_state / "agents" / "main" / "sessions"
    assert not list(sessions.glob("*.jsonl")), "no session was seeded"


def _sessions(state: Path) -> list[str]:
    """The agent's listed sessions and transcript files."""
    folder = state / "agents" / "main" / "sessions"
    listed = list(SessionStore(folder / "sessions.json").load())
    return listed + [p.name for p in folder.rglob("*.jsonl")]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_prompt_that_fits_only_without_the_tools_leaves_no_session_and_no_image(
    vision_client: openai.OpenAI,
    model_server: ScriptedModelServer,
    isolated_state: Path,
    stream: bool,
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        vision_client.chat.completions.create(
            model="nodmix", user="album", stream=stream, messages=_history_and(WITH_TOOLS_TOO_BIG)
        )
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "context_length_exceeded", error
    assert model_server.requests == []
    assert _inbox(isolated_state) == []
    assert _sessions(isolated_state) == [], "the refused request seeded or created a session"
    assert "tool definitions and the system prompt" in error["message"]
    # The same session then works, and starts empty.
    vision_client.chat.completions.create(
        model="nodmix", user="album", messages=[{"role": "user", "content": "hello"}]
    )
    (request,) = model_server.requests
    assert "an old picture" not in json.dumps(request.body)


def test_a_response_too_long_for_the_window_leaves_no_image_behind(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer, isolated_state: Path
) -> None:
    image = {"type": "input_image", "image_url": _data_url(photo(420, 300)), "detail": "auto"}
    for text in (TOO_BIG, WITH_TOOLS_TOO_BIG):
        content = [{"type": "input_text", "text": text}, image]
        with pytest.raises(openai.BadRequestError, match="context window"):
            vision_client.responses.create(
                model="nodmix", input=[{"role": "user", "content": content}]
            )
        assert _inbox(isolated_state) == []


def test_an_unusable_image_after_a_good_one_leaves_neither_behind(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer, isolated_state: Path
) -> None:
    corrupt = {"type": "image_url", "image_url": {"url": _data_url(b"\xff\xd8\xff junk" * 20)}}
    with pytest.raises(openai.BadRequestError, match="could not be used"):
        vision_client.chat.completions.create(
            model="nodmix",
            messages=[{"role": "user", "content": [_picture(450), corrupt]}],
        )
    assert _inbox(isolated_state) == []


def test_a_refusal_keeps_the_image_an_earlier_accepted_request_saved(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer, isolated_state: Path
) -> None:
    picture = _picture(500)
    vision_client.chat.completions.create(
        model="nodmix",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}, picture]}],
    )
    saved = _inbox(isolated_state)
    assert len(saved) == 1
    with pytest.raises(openai.BadRequestError, match="context window"):
        vision_client.chat.completions.create(
            model="nodmix",
            messages=[{"role": "user", "content": [{"type": "text", "text": TOO_BIG}, picture]}],
        )
    assert _inbox(isolated_state) == saved
