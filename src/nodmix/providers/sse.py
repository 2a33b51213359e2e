r"""An incremental server-sent-events decoder.

Network reads split the stream anywhere (mid-line, between `\r` and `\n`), so the decoder
keeps the unfinished tail between `feed()` calls and only emits an event once its terminating
blank line has arrived. It follows the WHATWG rules that matter for model APIs: `event:` and
`data:` fields, multi-line data joined by newlines, comments (`: keep-alive`) ignored.
"""

from __future__ import annotations

import msgspec


class SSEEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One server-sent event."""

    event: str = "message"
    """The `event:` field; `message` when the server sent none (OpenAI style)."""
    data: str = ""
    """The `data:` lines joined by newlines."""


MAX_LINE_CHARS = 64 << 20
"""Longest line the decoder holds; a server streaming an endless line is cut off here."""


class SSELineTooLong(ValueError):
    """A line grew past `MAX_LINE_CHARS` without ending."""


class SSEDecoder:
    """Feed text as it arrives; get back the events it completed."""

    def __init__(self, *, max_line_chars: int = MAX_LINE_CHARS) -> None:
        self._max_line = max_line_chars
        self._held = 0
        self._buffer = ""
        self._pieces: list[str] = []
        """Chunks of an unfinished line, joined only once its end arrives (linear time)."""
        self._event = ""
        self._data: list[str] = []
        self._pending = False

    def feed(self, text: str) -> list[SSEEvent]:
        """Decode a chunk of the stream and return the events it completed."""
        if not text:
            return []
        if "\n" not in text and "\r" not in text:
            self._held += len(text)
            if self._held > self._max_line:
                raise SSELineTooLong(f"a stream line longer than {self._max_line} characters")
            self._pieces.append(text)
            return []
        if self._pieces:
            self._pieces.append(text)
            text, self._pieces, self._held = "".join(self._pieces), [], 0
        buffer = self._buffer + text
        # A trailing "\r" may be the first half of "\r\n"; wait for the next chunk to know.
        hold_cr = buffer.endswith("\r")
        if hold_cr:
            buffer = buffer[:-1]
        lines = buffer.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._buffer = lines.pop() + ("\r" if hold_cr else "")
        events: list[SSEEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: emit an event the server did not terminate with a blank line."""
        if self._pieces:
            self._buffer += "".join(self._pieces)
            self._pieces, self._held = [], 0
        events = self.feed("\n") if self._buffer.rstrip("\r") else []
        self._buffer = ""
        tail = self._line("")
        return [*events, tail] if tail is not None else events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._pending:
                return None
            event = SSEEvent(event=self._event or "message", data="\n".join(self._data))
            self._event, self._data, self._pending = "", [], False
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
            self._pending = True
        elif name == "data":
            self._data.append(value)
            self._pending = True
        return None
