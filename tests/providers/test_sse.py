"""The incremental SSE decoder copes with any split of the byte stream."""

from __future__ import annotations

import pytest

from nodmix.providers.sse import SSEDecoder, SSEEvent

STREAM = (
    ": keep-alive comment\n"
    "event: message_start\n"
    'data: {"a": 1}\n'
    "\n"
    'data: {"b": 2}\n'
    "\n"
    "event: multi\n"
    "data: line one\n"
    "data: line two\n"
    "id: 7\n"
    "\n"
    "data: [DONE]\n"
    "\n"
)
EXPECTED = [
    SSEEvent(event="message_start", data='{"a": 1}'),
    SSEEvent(event="message", data='{"b": 2}'),
    SSEEvent(event="multi", data="line one\nline two"),
    SSEEvent(event="message", data="[DONE]"),
]


def decode_in_pieces(text: str, size: int) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for start in range(0, len(text), size):
        events.extend(decoder.feed(text[start : start + size]))
    return events + decoder.flush()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, 10_000])
def test_events_are_the_same_however_the_stream_is_split(size: int) -> None:
    assert decode_in_pieces(STREAM, size) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 10_000])
def test_crlf_and_cr_line_endings_are_accepted(size: int) -> None:
    assert decode_in_pieces(STREAM.replace("\n", "\r\n"), size) == EXPECTED
    assert decode_in_pieces(STREAM.replace("\n", "\r"), size) == EXPECTED


def test_an_unterminated_last_event_is_emitted_on_flush() -> None:
    decoder = SSEDecoder()
    assert decoder.feed('data: {"x": 1}') == []
    assert decoder.flush() == [SSEEvent(data='{"x": 1}')]


def test_value_keeps_everything_after_the_first_space() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("data:  two spaces\ndata:none\n\n") == [SSEEvent(data=" two spaces\nnone")]


def test_blank_lines_without_fields_emit_nothing() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("\n\n: ping\n\n") == []
    assert decoder.flush() == []
