"""Images for models, with Pillow: identified by their content, bounded before any pixel is
decoded, turned upright, downscaled to a long side and encoded again.

Only the formats models take, and their close kin, are opened (`FORMATS`): Pillow can read
many more, some through outside programs, and a sender chooses the bytes. The size check
reads the header alone, so a small file that claims 100,000 x 100,000 pixels is refused
before a byte of memory goes to its pixels; a JPEG is decoded at a reduced scale directly
(`draft`), which makes a 12-megapixel photo cheap.

Photos come back as JPEG; graphics (PNG, GIF, BMP sources, anything with transparency) as
PNG while that stays small, else as JPEG too.

`image_block` is the one call a tool needs that has image bytes for a model (the `read` tool,
a browser's screenshots): `ImageBlock` content, or `MediaError` with a readable reason.
"""

from __future__ import annotations

import base64
import io
import threading
from dataclasses import dataclass

import anyio
from PIL import Image, ImageOps, UnidentifiedImageError

from nodmix.media.errors import MediaError
from nodmix.media.settings import DEFAULT_MAX_SIDE
from nodmix.messages import ImageBlock

MAX_SOURCE_PIXELS = 64_000_000
"""Larger JPEGs are refused unread (a 64-megapixel photo still passes: it is decoded at a
reduced scale, so it never takes its full size in memory)."""
MAX_DECODED_PIXELS = 40_000_000
"""Larger images of the other formats are refused unread: they are decoded whole (at most
160 MB for RGBA pixels)."""
PREPARING = threading.BoundedSemaphore(2)
"""Images decoded at once, process-wide (worker threads wait their turn): the memory a burst
of large images takes stays that of two."""
FORMATS = {
    "JPEG": "image/jpeg",
    "MPO": "image/jpeg",  # what Pillow calls many phones' JPEGs
    "PNG": "image/png",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
    "TIFF": "image/tiff",
}
_OPENERS = [name for name in FORMATS if name != "MPO"]  # MPO files open through JPEG
PNG_MAX_BYTES = 1_000_000
"""A PNG result larger than this (a photo saved as PNG) is sent as JPEG instead."""
JPEG_QUALITY = 85

_OTHER_IMAGES = (
    (b"<svg", "SVG"),
    (b"<?xml", "SVG"),
    (b"ftypheic", "HEIC"),
    (b"ftypheix", "HEIC"),
    (b"ftypmif1", "HEIF"),
    (b"ftypavif", "AVIF"),
    (b"\x00\x00\x00\x0cjP  ", "JPEG 2000"),
    (b"%PDF", "PDF"),
)


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What the header of an image says."""

    format: str
    mime_type: str
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """An image as a model gets it."""

    data: bytes
    mime_type: str
    width: int
    height: int
    source: ImageInfo

    def block(self) -> ImageBlock:
        """As image content (base64)."""
        return ImageBlock(
            data=base64.b64encode(self.data).decode("ascii"), mime_type=self.mime_type
        )


def unsupported_format(head: bytes) -> str | None:
    """The name of an image format models are not sent (SVG, HEIC, ...), from the first
    bytes of a file; None when it is none of those."""
    start = head[:64].lstrip()
    for magic, name in _OTHER_IMAGES:
        if start.startswith(magic) or (magic.startswith(b"ftyp") and head[4:12] == magic):
            return name
    return None


def _open(data: bytes) -> tuple[Image.Image, ImageInfo]:
    if not data:
        raise MediaError("the image file is empty (0 bytes)")
    try:
        image = Image.open(io.BytesIO(data), formats=_OPENERS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise MediaError(
            f"the image is too large (more than {MAX_SOURCE_PIXELS // 1_000_000} megapixels)"
        ) from None
    except Exception as exc:
        other = unsupported_format(data[:64])
        if other is not None:
            raise MediaError(
                f"{other} images are not supported; send a JPEG, PNG, GIF or WebP image"
            ) from None
        if isinstance(exc, UnidentifiedImageError):  # its text names a Python object
            raise MediaError(
                "not an image file Nodmix can read (its content is not JPEG, PNG, GIF, WebP, "
                "BMP or TIFF)"
            ) from None
        raise MediaError(f"not an image file Nodmix can read ({_reason(exc)})") from None
    fmt = image.format or "?"
    width, height = image.size
    if width <= 0 or height <= 0:
        raise MediaError(f"the image has no pixels ({width}x{height})")
    limit = MAX_SOURCE_PIXELS if fmt in ("JPEG", "MPO") else MAX_DECODED_PIXELS
    if width * height > limit:
        raise MediaError(
            f"the image is too large: {width}x{height} pixels "
            f"(at most {limit // 1_000_000} megapixels for {fmt})"
        )
    mime = FORMATS.get(fmt, "image/png")
    return image, ImageInfo(format=fmt, mime_type=mime, width=width, height=height)


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def identify(data: bytes) -> ImageInfo:
    """The header of an image, without decoding its pixels.

    Raises:
        MediaError: not an image of a supported format, or too large.
    """
    image, info = _open(data)
    image.close()
    return info


def prepare_image(data: bytes, max_side: int = DEFAULT_MAX_SIDE) -> PreparedImage:
    """Decode, turn upright (EXIF orientation), downscale to `max_side` on the long side and
    encode. CPU-bound: call it from a worker thread (`prepare_image_async`).

    Raises:
        MediaError: not an image of a supported format, too large, or corrupt.
    """
    image, info = _open(data)
    try:
        with PREPARING:
            return _prepare(image, info, max_side)
    except MediaError:
        raise
    except Exception as exc:  # a hostile file can break any decoder step
        raise MediaError(f"the image is damaged and cannot be read ({_reason(exc)})") from None
    finally:
        image.close()


def _prepare(image: Image.Image, info: ImageInfo, max_side: int) -> PreparedImage:
    scale = min(1.0, max_side / max(info.width, info.height))
    target = (max(1, round(info.width * scale)), max(1, round(info.height * scale)))
    if info.format in ("JPEG", "MPO"):
        image.draft("RGB", target)  # decode at 1/2, 1/4 or 1/8 scale when that is enough
    upright = ImageOps.exif_transpose(image)  # decodes
    alpha = upright.mode in ("RGBA", "LA", "PA") or (
        upright.mode == "P" and "transparency" in upright.info
    )
    if upright.mode not in ("RGB", "RGBA", "L", "LA"):
        upright = upright.convert("RGBA" if alpha else "RGB")
    upright.thumbnail((max_side, max_side), Image.Resampling.LANCZOS, reducing_gap=3.0)
    graphic = alpha or info.format in ("PNG", "GIF", "BMP")
    if graphic:
        png = _encode(upright, "PNG")
        if len(png) <= PNG_MAX_BYTES:
            return PreparedImage(png, "image/png", *upright.size, source=info)
    if upright.mode in ("RGBA", "LA"):
        flat = Image.new("RGB", upright.size, (255, 255, 255))
        flat.paste(upright, mask=upright.getchannel("A"))
        upright = flat
    elif upright.mode != "RGB" and upright.mode != "L":
        upright = upright.convert("RGB")
    jpeg = _encode(upright, "JPEG")
    return PreparedImage(jpeg, "image/jpeg", *upright.size, source=info)


def _encode(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    if fmt == "JPEG":
        image.save(out, "JPEG", quality=JPEG_QUALITY)
    else:
        image.save(out, "PNG", compress_level=6)
    return out.getvalue()


async def prepare_image_async(data: bytes, max_side: int = DEFAULT_MAX_SIDE) -> PreparedImage:
    """`prepare_image` in a worker thread (at most two decode at once, `PREPARING`)."""
    return await anyio.to_thread.run_sync(prepare_image, data, max_side)


async def image_block(data: bytes, max_side: int = DEFAULT_MAX_SIDE) -> ImageBlock:
    """Image bytes as content a vision model sees (downscaled, re-encoded): what a tool
    returns for an image it produced or read, such as a screenshot.

    Raises:
        MediaError: not an image of a supported format, too large, or corrupt.
    """
    return (await prepare_image_async(data, max_side)).block()
