"""Split a long reply into messages a platform accepts, without breaking words or code fences.

Pieces end at the last paragraph break, line break or space that fits (in that order of
preference); a word longer than the limit is cut. When a cut falls inside a fenced code block,
the piece closes the fence and the next piece reopens it with the same info string, so each
message renders on its own.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def split_text(text: str, limit: int) -> list[str]:
    """`text` as pieces of at most `limit` characters (empty text: no pieces)."""
    if limit < 16:
        raise ValueError("limit must be at least 16 characters")
    text = text.strip("\n")
    pieces: list[str] = []
    reopen = ""
    while text:
        budget = limit - len(reopen)
        if len(text) <= budget:
            pieces.append(reopen + text)
            break
        fence_close_room = 4  # "\n```" in case the cut lands inside a fence
        cut = _cut_point(text, budget - fence_close_room)
        head, text = text[:cut], text[cut:].lstrip(" ").lstrip("\n")
        left_open = open_fence(reopen + head)
        piece = reopen + head.rstrip()
        if left_open is not None:
            marker, info = left_open
            piece += "\n" + marker
            reopen = f"{marker}{info}\n"
        else:
            reopen = ""
        pieces.append(piece)
    return [p for p in pieces if p.strip()]


def _cut_point(text: str, budget: int) -> int:
    window = text[: budget + 1]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep, 0, budget + 1)
        if at > budget // 4:
            return at
    return budget


def open_fence(text: str) -> tuple[str, str] | None:
    """The fence (marker, info) left open at the end of `text`, if any."""
    open_: tuple[str, str] | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if not match:
            continue
        marker, info = match.group(2), match.group(3).strip()
        if open_ is None:
            open_ = (marker, info)
        elif marker[0] == open_[0][0] and len(marker) >= len(open_[0]) and not info:
            open_ = None
    return open_
