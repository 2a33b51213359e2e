"""Images and audio in OpenAI-compatible requests: `image_url` and `input_audio` parts of
`/v1/chat/completions`, `input_image` of `/v1/responses`.

Inline data (`data:` URLs, base64 audio) is decoded, saved once under the agent's `inbox/`
(named by content, so a client that resends its history stores each image once), checked
(a corrupt or unsupported image is a 400 before any turn starts) and handed on as files: the
prompt's to the turn, where images become references and audio is transcribed, an earlier
message's into the history a new session is seeded with. Remote image URLs are not fetched
(the gateway would fetch whatever a caller names): send the image inline.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from nodmix.agents import AgentProfile
from nodmix.channels.attachments import max_attachment_bytes, megabytes
from nodmix.gateway.errors import bad_request
from nodmix.media.errors import MediaError
from nodmix.media.files import InboundFile, inbox_path, save_unique
from nodmix.media.ingest import check_bytes
from nodmix.messages import Message

if TYPE_CHECKING:
    from nodmix.gateway.media_writes import MediaWrites
    from nodmix.gateway.state import Gateway

_SUFFIXES = {
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/bmp": ".bmp",
    "image/tiff": ".tiff",
}
_AUDIO_FORMATS = {"wav": "audio/wav", "mp3": "audio/mpeg", "ogg": "audio/ogg", "webm": "audio/webm"}


@dataclass(frozen=True, slots=True)
class InlineMedia:
    """An image or audio clip a request carries inline."""

    data: bytes
    mime_type: str
    kind: str
    """`image` or `audio`."""
    where: str
    """Where in the request it is (`messages[2].content[1]`), for error messages."""


@dataclass(slots=True)
class UserParts:
    """A user message's text and media, before the media are saved."""

    text: str
    media: list[InlineMedia] = field(default_factory=list)


def _b64(data: str, where: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{where}: the data is not valid base64", param=where) from None


def image_part(url: Any, where: str) -> InlineMedia:
    """An `image_url`/`input_image` URL as image bytes (`data:` URLs only).

    Raises:
        APIError: 400 for a remote URL, a malformed `data:` URL or a non-image type.
    """
    if not isinstance(url, str) or not url:
        raise bad_request(f"{where}: the image needs a URL", param=where)
    if not url.startswith("data:"):
        raise bad_request(
            f"{where}: remote image URLs are not fetched; send the image inline as a "
            "data: URL (data:image/png;base64,...)",
            param=where,
        )
    head, sep, payload = url[5:].partition(",")
    mime, _, encoding = head.partition(";")
    if not sep or encoding != "base64" or not mime.startswith("image/"):
        raise bad_request(f"{where}: expected data:image/<type>;base64,<data>", param=where)
    return InlineMedia(data=_b64(payload, where), mime_type=mime, kind="image", where=where)


def audio_part(part: dict[str, Any], where: str) -> InlineMedia:
    """An `input_audio` part (`{data, format}`) as audio bytes.

    Raises:
        APIError: 400 for missing data or an unknown format.
    """
    spec = part.get("input_audio")
    spec = spec if isinstance(spec, dict) else {}
    data, fmt = spec.get("data"), spec.get("format")
    if not isinstance(data, str) or fmt not in _AUDIO_FORMATS:
        formats = ", ".join(_AUDIO_FORMATS)
        raise bad_request(f"{where}: input_audio needs data and a format ({formats})", param=where)
    return InlineMedia(
        data=_b64(data, where), mime_type=_AUDIO_FORMATS[fmt], kind="audio", where=where
    )


async def save_media(
    gateway: Gateway,
    agent: AgentProfile,
    media: Sequence[InlineMedia],
    writes: MediaWrites | None = None,
    *,
    history: bool = False,
) -> list[InboundFile]:
    """Save each item under the agent's `inbox/` (at most `maxAttachmentBytes` each) and
    check it; `writes` learns which files the request created (the `history`'s or the
    prompt's) and uses, so a refusal can remove them again.

    Raises:
        APIError: 400 for an item over the cap, or one that is not a usable image or audio.
    """
    if not media:
        return []
    limit = max_attachment_bytes(gateway.runtime.config, "defaults")
    files: list[InboundFile] = []
    for item in media:
        if len(item.data) > limit:
            raise bad_request(
                f"{item.where}: the {item.kind} is {megabytes(len(item.data))}, larger than "
                f"{megabytes(limit)} (channels.defaults.maxAttachmentBytes)",
                param=item.where,
            )
        suffix = _SUFFIXES.get(item.mime_type, "")
        if item.kind == "audio":
            suffix = "." + item.mime_type.rpartition("/")[2].replace("mpeg", "mp3")
        kind = "image" if item.kind == "image" else "audio"
        await checked(item.data, InboundFile(path="", kind=kind), item.where)
        created: list[str] = []
        path = await anyio.to_thread.run_sync(
            save_unique, agent.workspace, item.data, f"api-{item.kind}", suffix, created
        )
        if writes is not None:
            writes.use(path)
            (writes.created_history if history else writes.created_prompt).extend(created)
        files.append(InboundFile(path=path, kind=kind, mime_type=item.mime_type))
    return files


async def checked(data: bytes, file: InboundFile, where: str) -> None:
    """`data` is a usable image or audio clip, before it is saved (nothing is transcribed).

    Raises:
        APIError: 400 saying why it is not.
    """
    try:
        await anyio.to_thread.run_sync(check_bytes, data, file)
    except MediaError as exc:
        raise bad_request(f"{where}: {exc}", param=where) from None


async def seeded_history(
    gateway: Gateway,
    agent: AgentProfile,
    history: Sequence[Message | UserParts],
    writes: MediaWrites | None = None,
) -> list[Message]:
    """Earlier messages of a client's history, their images saved and referenced (audio in
    them is named, not transcribed)."""
    out: list[Message] = []
    for item in history:
        if not isinstance(item, UserParts):
            out.append(item)
            continue
        files = await save_media(gateway, agent, item.media, writes, history=True)
        out.append(
            await gateway.runtime.media.user_message(
                item.text,
                files,
                agent_id=agent.id,
                workspace=agent.workspace,
                model=None,
                transcribe=False,
            )
        )
    return out


_UPLOAD_KINDS = frozenset({"image", "audio", "voice", "document"})


def attachment_files(agent: AgentProfile, attachments: list[Any]) -> list[InboundFile]:
    """The `attachments` of a WebSocket `agent` request (`[{path, kind, name}]`, as
    `POST /media/upload` answered them) as files of the turn.

    Raises:
        APIError: 400 for an entry that is not an uploaded file of `inbox/`.
    """
    files: list[InboundFile] = []
    for index, item in enumerate(attachments[:20]):
        where = f"attachments[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            raise bad_request(f"params.{where} must be {{path, kind, name}}", param=where)
        try:
            path = inbox_path(agent.workspace, item["path"])
        except ValueError as exc:
            raise bad_request(f"params.{where}: {exc}", param=where) from None
        kind = item.get("kind") if item.get("kind") in _UPLOAD_KINDS else "document"
        name = item.get("name") if isinstance(item.get("name"), str) else None
        files.append(InboundFile(path=path, kind=str(kind), name=name))
    if len(attachments) > 20:
        raise bad_request("params.attachments: at most 20 files per message", param="attachments")
    return files
