"""Images described in words for a text-only model, by `agents.defaults.media.imageModel`.

The description is asked for once, when the image arrives, and kept in the transcript with
the image's reference; a text-only model reads it in place of the pixels.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio

from nodmix.messages import ImageBlock, TextBlock, UserMessage
from nodmix.providers.base import ModelRequest, ModelSpec, Provider, collect

log = logging.getLogger("nodmix.media")

DESCRIBE_SECONDS = 60.0
MAX_DESCRIPTION_CHARS = 2000
SYSTEM = (
    "You describe images for an assistant that cannot see them. Describe what the image "
    "shows, factually and specifically: objects, people's actions, the setting, and every "
    "piece of readable text (transcribe it). Plain prose, at most about 150 words."
)


class ResolvedLike(Protocol):
    @property
    def provider(self) -> Provider: ...

    @property
    def spec(self) -> ModelSpec: ...


class Resolver(Protocol):
    """`provider/model` to a provider and spec (the provider router)."""

    def resolve(self, ref: str) -> ResolvedLike: ...


async def describe_image(
    models: Resolver, ref: str, image: ImageBlock, *, caption: str = ""
) -> str | None:
    """What the model `ref` sees in `image` (one paragraph); None when it could not say
    (logged: the text-only model then gets the file name and a note instead)."""
    prompt = "Describe this image."
    if caption:
        prompt += f" The sender wrote with it: {caption[:500]}"
    try:
        resolved = models.resolve(ref)
        request = ModelRequest(
            model=resolved.spec,
            system=SYSTEM,
            messages=[UserMessage(content=(image, TextBlock(text=prompt)))],
            max_tokens=min(600, resolved.spec.max_tokens),
        )
        with anyio.fail_after(DESCRIBE_SECONDS):
            answer = await collect(resolved.provider, request)
    except Exception as exc:
        log.warning("image model %s could not describe an image: %s", ref, exc)
        return None
    text = " ".join(answer.text.split())
    return text[:MAX_DESCRIPTION_CHARS] or None
