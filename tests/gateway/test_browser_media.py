"""Pictures in the web page, in real headless Chromium: paste, drop and file picker, the
history after a reload; the model behind the gateway receives each image."""

from __future__ import annotations

import base64
import io
import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
from PIL import Image

from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import socket_gateway, wait_until
from tests.gateway.test_upload_slots import StalledUpload
from tests.support.config import scripted_config

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def count_images(request: ModelRequest) -> ModelReply:
    """Says how many images the last user message carried, and its text."""
    last = request.messages[-1]
    assert isinstance(last, UserMessage)
    images = sum(1 for block in last.content if block.__class__.__name__ == "ImageBlock")
    text = last.text.split("\n")[0]
    return ModelReply.text(f"saw {images} image: {text}")


def _png(color: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def test_images_pasted_dropped_and_picked_reach_the_model_and_stay_in_the_history(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    config = scripted_config(model_server.base_url)
    config["models"]["providers"]["local"]["models"][0]["input"] = ["text", "image"]
    config["tools"] = {"media": {"audio": {"provider": "local"}}}
    (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    model_server.respond = count_images
    blue = base64.b64encode(_png((0, 0, 200), (64, 48))).decode()
    with socket_gateway() as gateway:
        done = run_spec("media", gateway.url, BLUE_PNG=blue)
    assert_steps_passed(done, 7)
    seen = [model_server.images(i) for i in range(len(model_server.requests))]
    assert [len(images) for images in seen] == [1, 2, 3, 3], "earlier turns' images still shown"
    recording = model_server.audio_calls[0]
    assert recording.file_data[:4] == b"\x1aE\xdf\xa3", "the browser's WebM recording"
    seen = seen[:3]
    colors = [
        Image.open(io.BytesIO(base64.b64decode(images[-1].data))).convert("RGB").getpixel((5, 5))
        for images in seen
    ]
    assert colors == [(208, 0, 0), (0, 160, 0), (0, 0, 200)]
    inbox = sorted(p.name for p in (isolated_state / "workspace" / "inbox").iterdir())
    assert len(inbox) == 4 and all(name.startswith("upload-") for name in inbox)


def test_an_upload_refused_while_the_client_has_one_in_flight_is_retried_by_the_page(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    config = scripted_config(model_server.base_url, gateway={"maxUploadsPerClient": 1})
    (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    blue = base64.b64encode(_png((0, 0, 200), (64, 48))).decode()
    log = isolated_state / "logs" / "nodmix.log"

    def refused() -> bool:
        return log.exists() and "refusing an upload from 127.0.0.1" in log.read_text()

    with socket_gateway() as gateway, ExitStack() as stack:
        stalled = StalledUpload(gateway, "127.0.0.1", stack)  # the client's one slot
        assert stalled.head.startswith(b"HTTP/1.1 100")
        with ThreadPoolExecutor(max_workers=1) as pool:
            spec = pool.submit(run_spec, "upload_retry", gateway.url, BLUE_PNG=blue)
            wait_until(refused, what="the page's upload refused", timeout=60)
            assert b"HTTP/1.1 200" in stalled.finish()  # the slot frees while the page waits
            done = spec.result(timeout=120)
    assert_steps_passed(done, 2)
    inbox = sorted(p.name for p in (isolated_state / "workspace" / "inbox").iterdir())
    assert len(inbox) == 2, inbox  # the stalled upload's file and the page's
