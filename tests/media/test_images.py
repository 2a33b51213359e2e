"""Image preparation with Pillow: downscaled, upright, re-encoded; hostile files refused
before their pixels are decoded."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from nodmix.media.errors import MediaError
from nodmix.media.images import identify, prepare_image, unsupported_format
from tests.media.samples import noise, photo, png_claiming


def _open(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def test_a_large_photo_is_downscaled_to_the_long_side_and_stays_a_jpeg() -> None:
    prepared = prepare_image(photo(4032, 3024), 1568)
    assert prepared.mime_type == "image/jpeg"
    assert (prepared.width, prepared.height) == (1568, 1176)
    assert _open(prepared.data).size == (1568, 1176)
    assert prepared.source.width == 4032 and prepared.source.format == "JPEG"


def test_a_small_image_keeps_its_size_and_a_graphic_stays_a_png() -> None:
    prepared = prepare_image(photo(300, 200, "PNG"), 1568)
    assert (prepared.mime_type, prepared.width, prepared.height) == ("image/png", 300, 200)


def test_transparency_is_kept_as_png_and_flattened_when_that_png_would_be_large() -> None:
    clear = Image.new("RGBA", (100, 80), (255, 0, 0, 0))
    out = io.BytesIO()
    clear.save(out, "PNG")
    assert prepare_image(out.getvalue()).mime_type == "image/png"
    big = Image.open(io.BytesIO(noise(1200, 1200))).convert("RGBA")
    out = io.BytesIO()
    big.save(out, "PNG")
    prepared = prepare_image(out.getvalue())
    assert prepared.mime_type == "image/jpeg" and _open(prepared.data).mode == "RGB"


def test_exif_orientation_turns_a_sideways_phone_photo_upright() -> None:
    image = Image.new("RGB", (400, 200), (0, 0, 255))
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to view
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif)
    prepared = prepare_image(out.getvalue())
    assert (prepared.width, prepared.height) == (200, 400)


def test_only_the_first_frame_of_an_animation_is_taken() -> None:
    frames = [Image.new("P", (50, 40), i) for i in (10, 200)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:])
    prepared = prepare_image(out.getvalue())
    assert prepared.mime_type == "image/png" and (prepared.width, prepared.height) == (50, 40)


def test_a_png_claiming_100k_by_100k_pixels_is_refused_without_decoding() -> None:
    bomb = png_claiming(100_000, 100_000)
    assert len(bomb) < 200
    with pytest.raises(MediaError, match="too large"):
        identify(bomb)
    with pytest.raises(MediaError, match="too large"):
        prepare_image(bomb)


def test_an_image_just_over_the_pixel_limit_is_refused_by_its_header() -> None:
    with pytest.raises(MediaError, match="8001x8001 pixels"):
        identify(png_claiming(8001, 8001))


def test_a_truncated_image_is_reported_as_damaged() -> None:
    whole = photo(800, 600)
    with pytest.raises(MediaError, match="damaged"):
        prepare_image(whole[: len(whole) // 3])


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "empty"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'><script>x</script></svg>", "SVG images are not"),
        (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00", "HEIC images are not"),
        (b"%PDF-1.7\n", "PDF images are not"),
        (b"MZ\x90\x00 an executable", "not an image file"),
        (b"%!PS-Adobe-3.0 EPSF-3.0\n", "not an image file"),
    ],
)
def test_what_is_not_a_supported_image_is_refused_with_a_reason(data: bytes, says: str) -> None:
    with pytest.raises(MediaError, match=says):
        prepare_image(data)


def test_unsupported_formats_are_named_from_their_first_bytes() -> None:
    assert unsupported_format(b"  <svg>") == "SVG"
    assert unsupported_format(b"\x00\x00\x00\x20ftypavif") == "AVIF"
    assert unsupported_format(b"\xff\xd8\xff") is None


def test_formats_decoded_whole_have_a_lower_pixel_limit_than_jpeg() -> None:
    with pytest.raises(MediaError, match="at most 40 megapixels for PNG"):
        identify(png_claiming(7000, 7000))


def test_a_file_that_is_no_image_is_refused_in_words_without_python_internals() -> None:
    with pytest.raises(MediaError) as caught:
        prepare_image(b"<html><script>alert(1)</script></html>")
    message = str(caught.value)
    assert "JPEG, PNG, GIF, WebP, BMP or TIFF" in message
    assert "BytesIO" not in message and " object at 0x" not in message
