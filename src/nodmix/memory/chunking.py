"""Markdown split into search chunks: by headings, then paragraphs, with overlap.

A heading always starts a new chunk (a heading right after another heading stays with it), and
paragraphs are added while the chunk stays under `max_chars`. When a chunk fills up, the next
one starts with the last lines of it (up to `overlap_chars`), so a fact that straddles the
boundary is whole in at least one chunk. Each chunk knows its 1-based line range and the
headings above it (its `title`), which are indexed with it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

import msgspec

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of a file that is indexed and returned as one search hit."""

    start_line: int
    """1-based, inclusive."""
    end_line: int
    """1-based, inclusive."""
    text: str
    title: str = ""
    """The headings above the chunk, `A > B`."""

    @property
    def hash(self) -> str:
        """Content hash of what gets embedded (title and text): the embedding cache key."""
        return content_hash(self.embed_text)

    @property
    def embed_text(self) -> str:
        """The text given to an embeddings model."""
        return f"{self.title}\n{self.text}" if self.title else self.text


def content_hash(text: str) -> str:
    """A short stable hash of some text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class _Block(msgspec.Struct, kw_only=True):
    start: int  # 0-based line index
    lines: list[str]
    heading: tuple[int, str] | None = None

    @property
    def size(self) -> int:
        return sum(len(line) + 1 for line in self.lines)


def _blocks(lines: list[str]) -> Iterator[_Block]:
    """Headings (one line each) and paragraphs (runs of non-blank lines)."""
    current: _Block | None = None
    in_fence = False
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            if current is not None:
                yield current
                current = None
            level = len(heading.group(1))
            yield _Block(start=number, lines=[line], heading=(level, heading.group(2)))
        elif not stripped and not in_fence:
            if current is not None:
                yield current
                current = None
        elif current is None:
            current = _Block(start=number, lines=[line])
        else:
            current.lines.append(line)
    if current is not None:
        yield current


def _split_large(block: _Block, max_chars: int) -> Iterator[_Block]:
    """A paragraph longer than a chunk, as runs of whole lines."""
    piece: list[str] = []
    start = block.start
    size = 0
    for offset, line in enumerate(block.lines):
        if piece and size + len(line) + 1 > max_chars:
            yield _Block(start=start, lines=piece)
            piece, size, start = [], 0, block.start + offset
        piece.append(line)
        size += len(line) + 1
    if piece:
        yield _Block(start=start, lines=piece)


def chunk_markdown(text: str, *, max_chars: int = 1600, overlap_chars: int = 320) -> list[Chunk]:
    """Split Markdown into chunks with line ranges and heading titles."""
    lines = text.splitlines()
    chunks: list[Chunk] = []
    trail: list[tuple[int, str]] = []
    # The chunk being built: (line index, line) pairs, plus its title and whether it has body.
    body: list[tuple[int, str]] = []
    title = ""
    has_text = False

    def flush() -> None:
        nonlocal body, has_text
        if body and has_text:
            chunks.append(
                Chunk(
                    start_line=body[0][0] + 1,
                    end_line=body[-1][0] + 1,
                    text="\n".join(lines[body[0][0] : body[-1][0] + 1]),
                    title=title,
                )
            )
        body, has_text = [], False

    for block in _blocks(lines):
        if block.heading is not None:
            if has_text:
                flush()
            level, name = block.heading
            trail = [(lvl, n) for lvl, n in trail if lvl < level] + [(level, name)]
            if not body:
                title = " > ".join(n for _, n in trail[:-1])
            body.append((block.start, block.lines[0]))
            continue
        pieces = [block] if block.size <= max_chars else list(_split_large(block, max_chars))
        for piece in pieces:
            size = sum(len(line) + 1 for _, line in body)
            if has_text and size + piece.size > max_chars:
                kept = _overlap(body, overlap_chars)
                flush()
                body = kept
                title = " > ".join(n for _, n in trail)
            body.extend((piece.start + i, line) for i, line in enumerate(piece.lines))
            has_text = True
    flush()
    return chunks


def _overlap(body: list[tuple[int, str]], overlap_chars: int) -> list[tuple[int, str]]:
    """The last whole lines of a chunk, up to `overlap_chars`."""
    kept: list[tuple[int, str]] = []
    size = 0
    for number, line in reversed(body):
        if not line.strip() or size + len(line) + 1 > overlap_chars:
            break
        kept.insert(0, (number, line))
        size += len(line) + 1
    return kept
