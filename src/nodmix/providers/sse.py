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


class SSEDecoder:
    """Feed text as it arrives; get back the events it completed."""

    def __init__(self) -> None:
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._pending = False

    def feed(self, text: str) -> list[SSEEvent]:
        """Decode a chunk of the stream and return the events it completed."""
        if not text:
            return []
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
