"""A message's saved files into the user message of its turn.

Each file is judged by its content (`sniff`), the platform's word for it only deciding what a
failure is called:

- an image is checked and prepared once (warming the cache for the request that follows) and
  recorded as a reference to its file (`ImageRefBlock`); when the agent's model is text-only
  and `imageModel` is set, that model's description is recorded with it;
- audio is transcribed, and the transcript joins the message text, marked as transcribed
  (the audio stays in `inbox/`);
- anything else is named by its workspace path, as before, for the agent's tools.

A file that cannot be used (a corrupt or oversized image, an empty or fake voice note, an
unsupported format, transcription off or failing) raises `MediaError` with the one line the
sender gets instead of a turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec

from nodmix.errors import WorkspaceEscapeError
from nodmix.media.errors import MediaError
from nodmix.media.files import InboundFile, read_media
from nodmix.media.settings import AUDIO_HINT
from nodmix.media.sniff import HEAD_BYTES, audio_type, sniff
from nodmix.messages import ImageBlock, ImageRefBlock, TextBlock, UserBlock, UserMessage

if TYPE_CHECKING:
    from nodmix.media.images import ImageInfo

IMAGE_KINDS = frozenset({"photo", "image", "sticker"})
AUDIO_KINDS = frozenset({"voice", "audio"})

Prepare = Callable[[ImageRefBlock], Awaitable[ImageBlock]]
"""Checks and prepares a saved image (raising `MediaError`); the prepared content."""
Transcribe = Callable[[bytes, InboundFile, str], Awaitable[str]]
"""The text of an audio file: (bytes, file, sniffed MIME type)."""
Describe = Callable[[ImageBlock, str], Awaitable[str | None]]
"""What an image model sees in a prepared image (given the message text), or None."""


class IngestParts(msgspec.Struct, frozen=True):
    """What turning files into content needs from the runtime."""

    prepare: Prepare
    transcribe: Transcribe | None
    """None: audio is checked and named, not transcribed (history a client resends)."""
    describe: Describe | None = None
    """Set when the turn's model is text-only and `imageModel` is configured."""


def _what(file: InboundFile) -> str:
    return {
        "photo": "photo",
        "image": "image",
        "sticker": "sticker",
        "voice": "voice note",
        "audio": "audio file",
    }.get(file.kind, "file")


async def user_message(
    text: str, files: Sequence[InboundFile], *, workspace: Path, parts: IngestParts
) -> UserMessage:
    """The turn's user message for `text` and the files saved with it.

    Raises:
        MediaError: a file cannot be used (the message is the sender's reply).
    """
    images: list[UserBlock] = []
    heard: list[str] = []
    notes: list[str] = []
    for file in files:
        what = _what(file)
        try:
            data, _ = await anyio.to_thread.run_sync(read_media, workspace, file.path)
        except (OSError, WorkspaceEscapeError) as exc:
            raise MediaError(f"That {what} could not be read: {exc}") from None
        head = data[:HEAD_BYTES]
        kind = sniff(head)
        if kind == "image" or file.kind in IMAGE_KINDS:
            try:
                info = await anyio.to_thread.run_sync(_identify, data)
                ref = ImageRefBlock(
                    path=file.path,
                    mime_type=info.mime_type,
                    name=file.name if file.name and file.name not in file.path else None,
                    width=info.width,
                    height=info.height,
                )
                prepared = await parts.prepare(ref)
            except MediaError as exc:
                raise MediaError(f"That {what} could not be used: {exc}") from None
            if parts.describe is not None:
                description = await parts.describe(prepared, text)
                if description:
                    ref = msgspec.structs.replace(ref, description=description)
            images.append(ref)
        elif kind == "audio" or file.kind in AUDIO_KINDS:
            if not data:
                raise MediaError(f"That {what} is empty (0 bytes), so there is nothing to hear.")
            mime = audio_type(head)
            if mime is None:
                raise MediaError(
                    f"That {what} is not audio in a format Nodmix knows "
                    "(OGG, WebM, MP3, M4A, WAV, FLAC, AMR), so it was not transcribed."
                )
            if parts.transcribe is None:
                notes.append(f"[{what} attached: {file.path}]")
                continue
            try:
                said = await parts.transcribe(data, file, mime)
            except MediaError as exc:
                if str(exc) == AUDIO_HINT:
                    raise
                raise MediaError(f"That {what} could not be transcribed: {exc}") from None
            heard.append(f"[{what} {file.path}, transcribed]\n{said or '(no speech heard)'}")
        else:
            notes.append(f"[{file.kind} attached: {file.path}]")
    body = "\n".join(part for part in (text, *heard, *notes) if part)
    content: list[UserBlock] = [TextBlock(text=body)] if body or not images else []
    return UserMessage(content=(*content, *images))


def check_bytes(data: bytes, file: InboundFile) -> None:
    """Check a file before it is saved: an image must decode, audio must be a known
    container (CPU-bound for images: call it from a worker thread).

    Raises:
        MediaError: the same line `user_message` would give for the saved file.
    """
    from nodmix.media.images import prepare_image  # Pillow, loaded with the first image

    what = _what(file)
    kind = sniff(data[:HEAD_BYTES])
    if kind == "image" or file.kind in IMAGE_KINDS:
        try:
            prepare_image(data)
        except MediaError as exc:
            raise MediaError(f"That {what} could not be used: {exc}") from None
    elif kind == "audio" or file.kind in AUDIO_KINDS:
        if not data:
            raise MediaError(f"That {what} is empty (0 bytes), so there is nothing to hear.")
        if audio_type(data[:HEAD_BYTES]) is None:
            raise MediaError(f"That {what} is not audio in a format Nodmix knows.")


def _identify(data: bytes) -> ImageInfo:
    from nodmix.media.images import identify  # Pillow, loaded with the first image

    return identify(data)
