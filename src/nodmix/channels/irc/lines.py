"""IRC's line limit and flood control.

A server relays `PRIVMSG` as `:nick!user@host PRIVMSG target :text\r\n`, and the whole line
may be at most 512 bytes. `split_lines` cuts text into lines whose UTF-8 encoding fits the
room left after that prefix, at spaces where it can and never inside a character.
`FloodGate` lets a short burst through and then paces lines, so the server does not
disconnect the bot for flooding.
"""

from __future__ import annotations

import time

import anyio

IRC_LINE_BYTES = 512
MAX_USER_BYTES = 10
MAX_HOST_BYTES = 63


def text_budget(nick: str, target: str) -> int:
    """Bytes of text one `PRIVMSG target` line may carry, assuming the longest user and host
    the server may put in the prefix it adds."""
    prefix = f":{nick}!{'u' * MAX_USER_BYTES}@{'h' * MAX_HOST_BYTES} PRIVMSG {target} :"
    return IRC_LINE_BYTES - len(prefix.encode()) - len(b"\r\n")


def split_lines(text: str, max_bytes: int) -> list[str]:
    """`text` as IRC lines of at most `max_bytes` UTF-8 bytes (blank lines dropped)."""
    if max_bytes < 8:
        raise ValueError("max_bytes must be at least 8")
    out: list[str] = []
    for raw in text.replace("\r", "").split("\n"):
        line = raw.rstrip()
        while line:
            if len(line.encode()) <= max_bytes:
                out.append(line)
                break
            cut = _fit(line, max_bytes)
            space = line.rfind(" ", 0, cut + 1)
            if space > cut // 3:
                cut = space
            out.append(line[:cut].rstrip())
            line = line[cut:].lstrip(" ")
    return [line for line in out if line.strip()]


def _fit(line: str, max_bytes: int) -> int:
    """How many characters of `line` fit in `max_bytes` bytes."""
    used = 0
    for i, char in enumerate(line):
        used += len(char.encode())
        if used > max_bytes:
            return i
    return len(line)


class FloodGate:
    """A token bucket: `burst` lines at once, then one line per `delay` seconds."""

    def __init__(self, delay: float, burst: int = 4) -> None:
        self.delay = delay
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = anyio.Lock()

    async def wait(self) -> None:
        """Return when one more line may be sent."""
        async with self._lock:
            if self.delay <= 0:
                return
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) / self.delay)
            self._stamp = now
            if self._tokens < 1:
                await anyio.sleep((1 - self._tokens) * self.delay)
                self._tokens = 1.0
                self._stamp = time.monotonic()
            self._tokens -= 1
