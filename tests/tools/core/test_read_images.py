"""The `read` tool on images: a workspace image becomes image content a vision model sees on
its next request (by reference; the transcript keeps the path); anything else that claims to
be an image is an error result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from nodmix.messages import ImageBlock, ImageRefBlock, TextBlock
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.tools.base import ToolContext
from nodmix.tools.core.read import ReadTool
from tests.gateway.support import socket_gateway
from tests.media.samples import photo
from tests.support.config import scripted_config


def _ctx(workspace: Path) -> ToolContext:
    return ToolContext(
        agent_id="main",
        session_key="s",
        session_id="i",
        run_id="r",
        call_id="c",
        workspace=workspace,
    )


def test_a_workspace_image_is_returned_as_a_reference(tmp_path: Path) -> None:
    (tmp_path / "charts").mkdir()
    (tmp_path / "charts" / "q3.png").write_bytes(photo(640, 480, "PNG"))
    result = anyio.run(lambda: ReadTool().call({"path": "charts/q3.png"}, _ctx(tmp_path)))
    assert not result.is_error
    label, ref = result.content
    assert isinstance(label, TextBlock) and label.text == "[image: charts/q3.png, 640x480 PNG]"
    assert ref == ImageRefBlock(path="charts/q3.png", mime_type="image/png", width=640, height=480)


def test_an_image_outside_the_workspace_comes_back_inline_and_downscaled(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "diagram.jpg").write_bytes(photo(3000, 1000))
    tool = ReadTool(read_roots=[skills])
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    result = anyio.run(lambda: tool.call({"path": str(skills / "diagram.jpg")}, _ctx(workspace)))
    assert isinstance(result.content[1], ImageBlock)


@pytest.mark.parametrize("content", [b"not an image at all", b"<svg/>", b""])
def test_a_file_named_like_an_image_that_is_none_is_an_error(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "fake.png").write_bytes(content)
    result = anyio.run(lambda: ReadTool().call({"path": "fake.png"}, _ctx(tmp_path)))
    assert result.is_error and result.text_content.startswith("fake.png: ")


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(lambda request: ModelReply.text("x")) as server:
        yield server


@pytest.mark.integration
def test_a_vision_model_sees_the_image_the_read_tool_opened(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    config = scripted_config(model_server.base_url)
    config["models"]["providers"]["local"]["models"][0]["input"] = ["text", "image"]
    (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    workspace = isolated_state / "workspace"
    workspace.mkdir()
    (workspace / "receipt.jpg").write_bytes(photo(2000, 3000))

    def respond(request: ModelRequest) -> ModelReply:
        if len(request.messages) == 1:
            return ModelReply.tool_call("read", {"path": "receipt.jpg"})
        return ModelReply.text("a receipt")

    model_server.respond = respond
    with socket_gateway() as gateway:
        reply = httpx2.post(
            f"{gateway.url}/v1/chat/completions",
            headers={"Authorization": "Bearer test-token-0123"},
            json={"model": "nodmix", "messages": [{"role": "user", "content": "total?"}]},
            timeout=60,
        )
    assert reply.status_code == 200, reply.text
    images = model_server.images(1)
    assert len(images) == 1 and images[0].mime_type == "image/jpeg"
    sessions = isolated_state / "agents" / "main" / "sessions"
    transcript = "".join(p.read_text() for p in sessions.glob("*.jsonl"))
    assert '"type":"imageRef","path":"receipt.jpg"' in transcript
    assert images[0].data[:100] not in transcript
