"""What the memory index reports: a re-index (`SyncReport`) and a ranked hit (`SearchHit`)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

SNIPPET_CHARS: Final = 700


class SyncReport(msgspec.Struct, kw_only=True):
    """What one re-index did."""

    scanned: int = 0
    indexed: int = 0
    removed: int = 0
    embedded: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON shape for the CLI."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """One ranked result."""

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str = "memory"

    def to_json(self) -> dict[str, Any]:
        """The shape `memory_search` returns."""
        return {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "score": round(self.score, 4),
            "snippet": self.snippet,
            "source": self.source,
        }


def snippet(text: str) -> str:
    """A chunk's text cut to `SNIPPET_CHARS` for a hit."""
    text = text.strip()
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"
