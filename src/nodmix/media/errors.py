"""The one error type of the media package: a readable line the user sees as the reply."""

from __future__ import annotations

from nodmix.errors import NodmixError


class MediaError(NodmixError):
    """An image or audio file that cannot be used (corrupt, empty, unsupported, too large),
    or a media service that is missing or failed. The message is the reply the sender gets."""
