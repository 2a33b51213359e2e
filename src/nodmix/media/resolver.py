"""The images of one model request: pixels where they help, one line where they do not.

Transcripts keep images as references to files (`ImageRefBlock`). Before each request the
loop asks `ImageResolver.prepare` for the messages in the form a given model takes:

- images in the last `keepImageTurns` user turns are read, downscaled and encoded (once:
  `ImageCache`) and sent as image content to a vision model;
- a text-only model gets a one-line note instead (with what `imageModel` saw, when it
  described the image on arrival);
- images of older turns become a one-line placeholder for every model, so a long chat does
  not send every photo it ever saw on every request. Inline images (an MCP tool's result)
  age the same way.

A request without images (the usual case) costs one pass over the block types.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec

from nodmix.errors import WorkspaceEscapeError
from nodmix.media.cache import ImageCache, file_key
from nodmix.media.errors import MediaError
from nodmix.media.files import open_media, read_capped
from nodmix.media.settings import ImageSettings
from nodmix.messages import (
    AssistantMessage,
    ImageBlock,
    ImageRefBlock,
    Message,
    TextBlock,
    ToolResultMessage,
    UserMessage,
    carries_images,
)

if TYPE_CHECKING:
    from nodmix.providers.base import ModelSpec

log = logging.getLogger("nodmix.media")

ForModel = Callable[["ModelSpec"], Sequence[Message]]

EARLIER_INLINE_NOTE = "[an image from an earlier turn, no longer shown]"
BLIND_INLINE_NOTE = "[an image: this model cannot see images]"


def earlier_note(block: ImageRefBlock) -> str:
    """The placeholder of an image from a turn before the last `keepImageTurns`."""
    seen = f"; it showed: {block.description}" if block.description else ""
    return (
        f"[image {block.label} from an earlier turn, no longer shown{seen} "
        f"(read {block.path} to look at it again)]"
    )


def blind_note(block: ImageRefBlock) -> str:
    """What a text-only model gets for an image."""
    if block.description:
        return f"[image {block.label}, described by an image model: {block.description}]"
    return f"[image {block.label}: this model cannot see images]"


has_images = carries_images
"""Whether any message carries an image (inline or by reference)."""


def turn_cutoff(messages: Sequence[Message], keep_turns: int) -> int:
    """The index of the first message whose images are still shown: the `keep_turns`-th
    user message from the end (len(messages) when `keep_turns` is 0)."""
    if keep_turns <= 0:
        return len(messages)
    seen = 0
    for index in range(len(messages) - 1, -1, -1):
        if type(messages[index]) is UserMessage:
            seen += 1
            if seen == keep_turns:
                return index
    return 0


class ImageResolver:
    """Turns image references into what each model gets (see the module docstring)."""

    def __init__(self, cache: ImageCache, settings: Callable[[str], ImageSettings]) -> None:
        """`settings(agent_id)` gives the agent's image settings (read per request: a
        config reload takes effect at the next one)."""
        self.cache = cache
        self._settings = settings

    async def prepare(
        self, messages: Sequence[Message], *, agent_id: str, workspace: Path
    ) -> ForModel:
        """The messages per model spec (images loaded now, in a worker thread)."""
        if not has_images(messages):
            return lambda spec: messages
        settings = self._settings(agent_id)
        cutoff = turn_cutoff(messages, settings.keep_turns)
        wanted = list(
            dict.fromkeys(
                block
                for message in messages[cutoff:]
                if type(message) is not AssistantMessage
                for block in message.content
                if type(block) is ImageRefBlock
            )
        )
        loaded: dict[ImageRefBlock, ImageBlock | str] = {}
        if wanted:
            loaded = await anyio.to_thread.run_sync(
                self.load_all, wanted, workspace, settings.max_side
            )
        variants: dict[bool, list[Message]] = {}

        def for_model(spec: ModelSpec) -> Sequence[Message]:
            sees = spec.sees_images
            if sees not in variants:
                variants[sees] = _rewrite(messages, cutoff, loaded, sees=sees)
            return variants[sees]

        return for_model

    def load_all(
        self, blocks: Sequence[ImageRefBlock], workspace: Path, max_side: int
    ) -> dict[ImageRefBlock, ImageBlock | str]:
        """Each reference as image content, or the reason it cannot be shown."""
        return {block: self.load(block, workspace, max_side) for block in blocks}

    def load(self, block: ImageRefBlock, workspace: Path, max_side: int) -> ImageBlock | str:
        """One reference as image content (cached), or the reason it cannot be shown."""
        try:
            with open_media(workspace, block.path) as handle:
                key = file_key(os.fstat(handle.fileno()), max_side)
                cached = self.cache.get(key)
                if cached is not None:  # not read again: the same file, prepared before
                    return cached
                data = read_capped(handle, block.path)
            from nodmix.media.images import prepare_image  # Pillow, loaded with the first image

            prepared = prepare_image(data, max_side).block()
        except FileNotFoundError:
            return "the file is gone"
        except (OSError, WorkspaceEscapeError, MediaError) as exc:
            log.warning("image %s not shown: %s", block.path, exc)
            return str(exc)
        self.cache.put(key, prepared)
        return prepared

    def remember(self, block: ImageRefBlock, workspace: Path, max_side: int) -> ImageBlock:
        """Prepare a just-saved image now (checking it, and warming the cache for the
        request that follows).

        Raises:
            MediaError: the file is not a usable image.
        """
        result = self.load(block, workspace, max_side)
        if isinstance(result, str):
            raise MediaError(result)
        return result


def _rewrite(
    messages: Sequence[Message],
    cutoff: int,
    loaded: dict[ImageRefBlock, ImageBlock | str],
    *,
    sees: bool,
) -> list[Message]:
    out: list[Message] = []
    for index, message in enumerate(messages):
        if type(message) is AssistantMessage or all(type(b) is TextBlock for b in message.content):
            out.append(message)
            continue
        assert isinstance(message, UserMessage | ToolResultMessage)
        recent = index >= cutoff
        blocks = [part for b in message.content for part in _blocks(b, loaded, recent, sees)]
        out.append(msgspec.structs.replace(message, content=tuple(blocks)))
    return out


def _blocks(
    block: TextBlock | ImageBlock | ImageRefBlock,
    loaded: dict[ImageRefBlock, ImageBlock | str],
    recent: bool,
    sees: bool,
) -> tuple[TextBlock | ImageBlock, ...]:
    if type(block) is TextBlock:
        return (block,)
    if isinstance(block, ImageBlock):
        if not recent:
            return (TextBlock(text=EARLIER_INLINE_NOTE),)
        return (block,) if sees else (TextBlock(text=BLIND_INLINE_NOTE),)
    assert isinstance(block, ImageRefBlock)
    if not recent:
        return (TextBlock(text=earlier_note(block)),)
    if not sees:
        return (TextBlock(text=blind_note(block)),)
    result = loaded.get(block)
    if isinstance(result, ImageBlock):  # named, so the model can point tools at the file
        return TextBlock(text=f"[image {block.label}]"), result
    reason = result or "not loaded"
    return (TextBlock(text=f"[image {block.label} cannot be shown: {reason}]"),)
