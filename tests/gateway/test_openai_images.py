"""Images through the OpenAI-compatible endpoints, sent with the official `openai` client to a
real gateway whose agent talks to a vision model behind the scripted model server; and
images of old turns turning into placeholders after `keepImageTurns`."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from PIL import Image

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import openai_client, socket_gateway, vision_config
from tests.media.samples import photo
from tests.support.config import scripted_config

pytestmark = pytest.mark.integration


def _data_url(data: bytes, mime: str = "image/jpeg") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _size(block: Any) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(block.data))).size  # type: ignore[no-any-return]


def test_chat_completions_image_url_reaches_the_model_downscaled(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer, isolated_state: Path
) -> None:
    completion = vision_client.chat.completions.create(
        model="nodmix",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": _data_url(photo(3000, 2000))}},
                ],
            }
        ],
    )
    assert completion.choices[0].message.content is not None
    images = model_server.images()
    assert len(images) == 1 and _size(images[0]) == (1568, 1045)
    body = json.dumps(model_server.requests[-1].body)
    assert body.count('"type": "image_url"') == 1
    saved = list((isolated_state / "workspace" / "inbox").iterdir())
    assert len(saved) == 1 and saved[0].name.startswith("api-image-")


def test_a_stateless_client_resending_its_history_stores_each_image_once(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer, isolated_state: Path
) -> None:
    picture = {"type": "image_url", "image_url": {"url": _data_url(photo(800, 600))}}
    first: Any = {"role": "user", "content": [{"type": "text", "text": "a chart"}, picture]}
    vision_client.chat.completions.create(model="nodmix", messages=[first])
    vision_client.chat.completions.create(
        model="nodmix",
        messages=[
            first,
            {"role": "assistant", "content": "a chart indeed"},
            {"role": "user", "content": "which colour is it?"},
        ],
    )
    assert len(model_server.images(-1)) == 1, "the seeded history carries the image"
    assert len(list((isolated_state / "workspace" / "inbox").iterdir())) == 1


def test_responses_input_image_reaches_the_model(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer
) -> None:
    response = vision_client.responses.create(
        model="nodmix",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "describe"},
                    {
                        "type": "input_image",
                        "image_url": _data_url(photo(600, 900, "PNG"), "image/png"),
                        "detail": "auto",
                    },
                ],
            }
        ],
    )
    assert response.status == "completed"
    images = model_server.images()
    assert (
        len(images) == 1 and images[0].mime_type == "image/png" and _size(images[0]) == (600, 900)
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://example.org/cat.jpg", "remote image URLs are not fetched"),
        (_data_url(b"\xff\xd8\xff garbage" * 20), "could not be used"),
        ("data:image/svg+xml;base64," + base64.b64encode(b"<svg/>").decode(), "SVG images"),
    ],
    ids=["remote", "corrupt", "svg"],
)
def test_an_unusable_image_is_a_400_that_says_why(
    vision_client: openai.OpenAI, model_server: ScriptedModelServer, url: str, says: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        vision_client.chat.completions.create(
            model="nodmix",
            messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
            ],
        )
    assert says in str(raised.value)
    assert model_server.requests == []


def test_images_older_than_keep_image_turns_become_one_line_placeholders(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    vision_config(isolated_state, model_server.base_url, keep=2)
    with socket_gateway() as gateway, openai_client(gateway.url) as client:
        for turn in range(4):
            client.chat.completions.create(
                model="nodmix",
                user="album",
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": f"picture {turn}"},
                            {
                                "type": "image_url",
                                "image_url": {"url": _data_url(photo(900 + turn, 700))},
                            },
                        ],
                    }
                ],
            )
    assert [len(model_server.images(i)) for i in range(4)] == [1, 2, 2, 2]
    assert [_size(b)[0] for b in model_server.images(-1)] == [512, 512]
    body = json.dumps(model_server.requests[-1].body)
    assert body.count("from an earlier turn, no longer shown") == 2
    assert body.count('"type": "image_url"') == 2


def test_an_anthropic_model_gets_the_image_as_a_base64_image_block(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    config = scripted_config(model_server.base_url)
    config["models"]["providers"]["claude"] = {
        "api": "anthropic-messages",
        "baseUrl": model_server.anthropic_base_url,
        "apiKey": "none",
        "models": [{"id": "claude-test", "input": ["text", "image"]}],
    }
    config["agents"]["defaults"]["model"] = {"primary": "claude/claude-test"}
    (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    with socket_gateway() as gateway, openai_client(gateway.url) as client:
        client.chat.completions.create(
            model="nodmix",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "and this?"},
                        {"type": "image_url", "image_url": {"url": _data_url(photo(500, 400))}},
                    ],
                }
            ],
        )
    recorded = model_server.requests[-1]
    assert recorded.api == "anthropic-messages"
    blocks = recorded.body["messages"][-1]["content"]
    image = next(b for b in blocks if b["type"] == "image")
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/jpeg"
    assert len(model_server.images()) == 1 and _size(model_server.images()[0]) == (500, 400)
