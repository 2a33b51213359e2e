"""How long a model call may wait and how much it may say.

Three waits bound every request: opening the connection (`connect_seconds`), the gap between
two stream events (`idle_seconds`; keep-alive comments and `ping` events do not count, so a
server that only trickles keep-alives still times out), and the whole turn (the agent's
`timeoutSeconds`, enforced by the loop). A reply is capped at `max_output_bytes` of text,
reasoning and tool-argument bytes: over it the adapter stops reading and ends the reply with
stop reason `length`.
"""

from __future__ import annotations

import msgspec

DEFAULT_CONNECT_SECONDS = 10.0
DEFAULT_IDLE_SECONDS = 60.0
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
"""1 MiB of reply text and tool arguments."""


class CallLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The waits and the output cap of one provider's requests."""

    connect_seconds: float = DEFAULT_CONNECT_SECONDS
    idle_seconds: float = DEFAULT_IDLE_SECONDS


def format_seconds(seconds: float) -> str:
    """`60` -> `60 s`, `0.5` -> `0.5 s`."""
    return f"{seconds:g} s"


class OutputBudget:
    """Counts the bytes a reply streams and says when the cap is reached.

    `None` means unlimited. Once `take()` had to cut, `exhausted` is true and every later
    call returns nothing.
    """

    __slots__ = ("exhausted", "limit", "used")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self.exhausted = False

    def take(self, text: str) -> str:
        """The part of `text` that still fits (all of it while under the cap)."""
        if self.limit is None or not text:
            return text
        if self.exhausted:
            return ""
        data = text.encode("utf-8")
        room = self.limit - self.used
        if len(data) <= room:
            self.used += len(data)
            return text
        self.used = self.limit
        self.exhausted = True
        return data[:room].decode("utf-8", errors="ignore")

    def charge(self, text: str) -> bool:
        """Count `text` (a tool-argument fragment) whole; false once over the cap."""
        if self.limit is None:
            return True
        if self.exhausted:
            return False
        self.used += len(text.encode("utf-8"))
        if self.used > self.limit:
            self.exhausted = True
        return not self.exhausted
