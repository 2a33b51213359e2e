"""What a file is, by its first bytes."""

from __future__ import annotations

import pytest

from nodmix.media.sniff import audio_type, image_type, sniff
from tests.media.samples import needs_ffmpeg, photo, voice_note


def test_images_are_known_by_their_magic_whatever_their_name() -> None:
    assert image_type(photo(10, 10)) == "image/jpeg"
    assert image_type(photo(10, 10, "PNG")) == "image/png"
    assert image_type(photo(10, 10, "WEBP")) == "image/webp"
    assert sniff(photo(10, 10, "GIF")) == "image"


def test_a_real_voice_note_is_ogg_audio() -> None:
    needs_ffmpeg()
    assert audio_type(voice_note(0.3)) == "audio/ogg"


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wav"),
        (b"ID3\x04\x00", "audio/mpeg"),
        (b"\xff\xfb\x90\x00", "audio/mpeg"),
        (b"\x1aE\xdf\xa3\x9fB\x86", "audio/webm"),
        (b"\x00\x00\x00\x20ftypM4A \x00", "audio/mp4"),
        (b"fLaC\x00", "audio/flac"),
        (b"#!AMR\n", "audio/amr"),
    ],
)
def test_audio_containers_are_known(head: bytes, mime: str) -> None:
    assert audio_type(head) == mime and sniff(head) == "audio"


@pytest.mark.parametrize(
    "head", [b"\x7fELF\x02\x01", b"MZ\x90\x00", b"#!/bin/sh\n", b"", b"PK\x03\x04", b"\xff\xd8"]
)
def test_programs_scripts_and_archives_are_neither(head: bytes) -> None:
    assert audio_type(head) is None
    assert sniff(head) == "other"
