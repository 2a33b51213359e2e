"""Files for the web page: `POST /media/upload` and `GET /media/file`.

The page uploads a pasted, dropped or picked image (or a recording) as the raw request body,
`POST /media/upload?agentId=<id>&name=<file name>[&kind=voice]`; the gateway saves it under
the agent's `inbox/` (named by content), checks it (a corrupt or unsupported image is a 400
at once) and answers `{path, kind, name, size, mimeType}`. The `agent` WebSocket method then
takes `attachments: [{path, kind, name}]` with the message. Uploads are capped by
`channels.defaults.maxAttachmentBytes`, not the smaller JSON body limit, and in number by
`gateway.maxConcurrentUploads` / `maxUploadsPerClient` (`upload_slots`).

`GET /media/file?agentId=<id>&path=<workspace path>` serves an image or audio file of the
workspace back (history shows the pictures it holds), only when its content is an image or
audio format (never HTML or SVG, which a browser would run), with `nosniff`. Both need the
gateway token like every API path.
"""

from __future__ import annotations

from pathlib import PurePath

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from nodmix.channels.attachments import max_attachment_bytes
from nodmix.errors import WorkspaceEscapeError
from nodmix.gateway.errors import APIError, bad_request, not_found
from nodmix.gateway.media_parts import checked
from nodmix.gateway.state import Gateway, gateway_of
from nodmix.gateway.upload_slots import (
    DEFAULT_MAX_CONCURRENT_UPLOADS,
    DEFAULT_MAX_UPLOADS_PER_CLIENT,
)
from nodmix.media.files import InboundFile, read_media, safe_name, save_unique
from nodmix.media.sniff import HEAD_BYTES, audio_type, image_type, sniff

UPLOAD_PATH = "/media/upload"
UPLOAD_LIMIT_KEY = "channels.defaults.maxAttachmentBytes"


def upload_limit(gateway: Gateway) -> int:
    """The upload cap of the gateway's current config."""
    return max_attachment_bytes(gateway.runtime.config, "defaults")


def upload_slots(gateway: Gateway) -> tuple[int, int]:
    """Uploads received at once: `(gateway-wide, per client)` (see `upload_slots`)."""
    section = gateway.runtime.config.gateway
    return (
        section.max_concurrent_uploads or DEFAULT_MAX_CONCURRENT_UPLOADS,
        section.max_uploads_per_client or DEFAULT_MAX_UPLOADS_PER_CLIENT,
    )


async def upload(request: Request) -> Response:
    """Save one uploaded file in the agent's `inbox/`."""
    gateway = gateway_of(request)
    agent = gateway.agent(request.query_params.get("agentId"))
    name = request.query_params.get("name") or "upload"
    data = await request.body()  # capped by the body limit middleware (`upload_limit`)
    if not data:
        raise bad_request("the upload is empty (0 bytes)", param="body")
    head = data[:HEAD_BYTES]
    found = sniff(head)
    if request.query_params.get("kind") == "voice" and found == "audio":
        kind = "voice"
    else:
        kind = {"image": "image", "audio": "audio"}.get(found, "document")
    declared = request.headers.get("content-type", "").split(";")[0].strip()
    if found == "other" and declared.startswith("image/"):
        kind = "image"  # said to be an image: checked as one (and refused clearly)
    stem, _, suffix = PurePath(name).name.rpartition(".")
    if kind != "document":
        await checked(data, InboundFile(path="", kind=kind), PurePath(name).name)
    path = await anyio.to_thread.run_sync(
        save_unique,
        agent.workspace,
        data,
        f"upload-{safe_name(stem or suffix, limit=30)}",
        suffix if stem else "",
    )
    mime = image_type(head) or audio_type(head) or declared or None
    file = InboundFile(path=path, kind=kind, name=PurePath(name).name, mime_type=mime)
    return JSONResponse(
        {"path": path, "kind": kind, "name": file.name, "size": len(data), "mimeType": mime}
    )


async def media_file(request: Request) -> Response:
    """An image or audio file of the agent's workspace."""
    gateway = gateway_of(request)
    agent = gateway.agent(request.query_params.get("agentId"))
    path = request.query_params.get("path") or ""
    rel = PurePath(path)
    if not path or rel.is_absolute() or ".." in rel.parts:
        raise bad_request("path must be a file in the agent's workspace", param="path")
    try:
        data, _ = await anyio.to_thread.run_sync(read_media, agent.workspace, path)
    except (OSError, WorkspaceEscapeError):
        raise not_found(f"no media file {path!r} in the workspace") from None
    head = data[:HEAD_BYTES]
    mime = image_type(head) or audio_type(head)
    if mime is None:
        raise APIError(
            status=415,
            message=f"{path} is not an image or audio file",
            code="unsupported_media_type",
        )
    return Response(
        data,
        media_type=mime,
        headers={
            "cache-control": "private, max-age=3600",
            "x-content-type-options": "nosniff",
            "content-security-policy": "default-src 'none'; sandbox",
        },
    )
