"""Images as tool results: what a tool returns when it has a picture for the model.

- `workspace_image`: a file already in the workspace (the `read` tool), as a reference;
- `saved_image`: image bytes a tool produced (a browser screenshot), saved in the workspace
  (`<folder>/<name>`) and returned as a reference;
- `inline_image`: image bytes downscaled and returned inline (a file outside the workspace).

A reference keeps the transcript small: the request resolver (`resolver.py`) sends the pixels
to vision models while the turn is recent, a one-line note to text-only models and later.
Every function checks the image first; a file that is not one gives an error result.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from nodmix.media.errors import MediaError
from nodmix.media.files import read_media, save_bytes
from nodmix.messages import ImageRefBlock, TextBlock
from nodmix.tools.base import ToolResult

if TYPE_CHECKING:
    from nodmix.media.images import ImageInfo

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff"})
"""The same list as the `read` tool's."""


def looks_like_image(path: Path) -> bool:
    """Whether the file name says image (the content is checked when it is read)."""
    return path.suffix.lower() in IMAGE_SUFFIXES


def _identify(data: bytes) -> ImageInfo:
    from nodmix.media.images import identify  # Pillow, loaded with the first image

    return identify(data)


async def _reference(data: bytes, path: str, label: str) -> ToolResult:
    try:
        info = await anyio.to_thread.run_sync(_identify, data)
    except MediaError as exc:
        return ToolResult.error(f"{path}: {exc}")
    ref = ImageRefBlock(path=path, mime_type=info.mime_type, width=info.width, height=info.height)
    text = f"[{label}: {path}, {info.width}x{info.height} {info.format}]"
    details = {"path": path, "image": True, "width": info.width, "height": info.height}
    return ToolResult(content=(TextBlock(text=text), ref), details=details)


async def workspace_image(workspace: Path, rel_path: str, *, label: str = "image") -> ToolResult:
    """A workspace image file as a reference (`rel_path` relative to the workspace)."""
    try:
        data, _ = await anyio.to_thread.run_sync(read_media, workspace, rel_path)
    except Exception as exc:
        return ToolResult.error(f"{rel_path}: cannot be read ({exc})")
    return await _reference(data, rel_path, label)


async def saved_image(
    workspace: Path, data: bytes, *, folder: str, name: str, label: str = "image"
) -> ToolResult:
    """Save `data` as `<folder>/<name>` in the workspace (never over a file, never through a
    symlink) and return it as a reference: the call a screenshot tool makes."""
    try:
        path = await anyio.to_thread.run_sync(save_bytes, workspace, data, name, folder)
    except Exception as exc:
        return ToolResult.error(f"cannot save the image: {exc}")
    return await _reference(data, path, label)


async def inline_image(data: bytes, *, label: str, max_side: int | None = None) -> ToolResult:
    """`data` downscaled and inline (for an image that has no workspace path)."""
    from nodmix.media.images import image_block
    from nodmix.media.settings import DEFAULT_MAX_SIDE

    try:
        block = await image_block(data, max_side or DEFAULT_MAX_SIDE)
    except MediaError as exc:
        return ToolResult.error(f"{label}: {exc}")
    return ToolResult(content=(TextBlock(text=f"[{label}]"), block), details={"image": True})
