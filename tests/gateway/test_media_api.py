"""`POST /media/upload` and `GET /media/file`: the page's uploads, capped and checked; only
images and audio served back, never through a symlink or out of the workspace."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client
from tests.media.samples import noise, photo
from tests.support.config import scripted_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def configured(isolated_state: Path, model_server: ScriptedModelServer) -> Path:
    config = scripted_config(
        model_server.base_url, channels={"defaults": {"maxAttachmentBytes": 200_000}}
    )
    (isolated_state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    return isolated_state


async def test_an_upload_is_saved_by_content_and_served_back(configured: Path) -> None:
    picture = photo(200, 100, "PNG")
    async with asgi_client() as client:
        sent = await client.post(
            "/media/upload?name=My Chart.png",
            content=picture,
            headers={"content-type": "image/png"},
        )
        assert sent.status_code == 200, sent.text
        body = sent.json()
        again = await client.post("/media/upload?name=My Chart.png", content=picture)
        served = await client.get("/media/file", params={"path": body["path"]})
    assert (
        body["kind"] == "image" and body["mimeType"] == "image/png" and body["size"] == len(picture)
    )
    assert body["path"].startswith("inbox/upload-My_Chart-") and body["name"] == "My Chart.png"
    assert again.json()["path"] == body["path"], "the same file uploaded again is kept once"
    assert len(list((configured / "workspace" / "inbox").iterdir())) == 1
    assert served.content == picture and served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 16_384):
        yield data[start : start + 16_384]


async def test_an_upload_over_the_cap_is_refused_before_it_is_read(configured: Path) -> None:
    async with asgi_client() as client:
        big = await client.post("/media/upload?name=big.png", content=noise(300, 300))
        assert big.status_code == 413
        assert "channels.defaults.maxAttachmentBytes" in big.json()["error"]["message"]
        chunked = await client.post("/media/upload?name=big.png", content=_chunks(noise(300, 300)))
        assert chunked.status_code == 413
        assert "channels.defaults.maxAttachmentBytes" in chunked.json()["error"]["message"]
        small_json = await client.post("/v1/chat/completions", content=b"x" * 300_000)
    assert small_json.status_code == 400, "the JSON endpoints keep their own body limit"
    assert not (configured / "workspace" / "inbox").exists()


@pytest.mark.parametrize(
    ("content", "name", "says"),
    [
        (b"\x89PNG\r\n\x1a\n not a png", "broken.png", "could not be used"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "x.svg", "SVG images are not supported"),
        (b"", "empty.png", "empty"),
    ],
)
async def test_a_bad_image_upload_is_a_400_and_nothing_is_saved(
    configured: Path, content: bytes, name: str, says: str
) -> None:
    async with asgi_client() as client:
        sent = await client.post(
            f"/media/upload?name={name}", content=content, headers={"content-type": "image/png"}
        )
    assert sent.status_code == 400 and says in sent.json()["error"]["message"]
    assert not (configured / "workspace" / "inbox").exists()


async def test_only_workspace_images_and_audio_are_served(configured: Path) -> None:
    workspace = configured / "workspace"
    (workspace / "inbox").mkdir(parents=True)
    (workspace / "page.html").write_text("<script>alert(1)</script>", encoding="utf-8")
    (workspace / "inbox" / "fake.png").write_bytes(b"<svg onload=alert(1)>")
    secret = configured / "secret.png"
    secret.write_bytes(photo(10, 10, "PNG"))
    (workspace / "inbox" / "link.png").symlink_to(secret)
    async with asgi_client() as client:
        html = await client.get("/media/file", params={"path": "page.html"})
        svg = await client.get("/media/file", params={"path": "inbox/fake.png"})
        link = await client.get("/media/file", params={"path": "inbox/link.png"})
        up = await client.get("/media/file", params={"path": "../secret.png"})
        absolute = await client.get("/media/file", params={"path": str(secret)})
    assert (html.status_code, svg.status_code) == (415, 415)
    assert (link.status_code, up.status_code, absolute.status_code) == (404, 400, 400)


async def test_the_media_paths_need_the_token(configured: Path) -> None:
    async with asgi_client() as client:
        client.headers.pop("authorization")
        upload = await client.post("/media/upload?name=a.png", content=photo(10, 10, "PNG"))
        fetch = await client.get("/media/file", params={"path": "inbox/a.png"})
    assert (upload.status_code, fetch.status_code) == (401, 401)


async def test_agent_attachments_must_be_uploaded_inbox_files(configured: Path) -> None:
    from nodmix.gateway.errors import APIError
    from nodmix.gateway.media_parts import attachment_files
    from nodmix.runtime import Runtime

    async with Runtime.open() as runtime:
        agent = runtime.agent(None)
        files = attachment_files(agent, [{"path": "inbox/upload-a-1.png", "kind": "image"}])
        assert files[0].kind == "image"
        for bad in ({"path": "../x"}, {"path": "notes/MEMORY.md"}, "inbox/a.png", {"kind": "x"}):
            with pytest.raises(APIError):
                attachment_files(agent, [bad])
