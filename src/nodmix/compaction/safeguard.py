"""Safeguard mode: checks and deterministic additions that do not trust the summariser alone.

A summarising model can drop a heading, paraphrase the user's last request or "fix" an ID.
Safeguard mode (the default) checks the required headings (one retry with a note when some are
missing) and appends, verbatim from the condensed messages:

- the user's latest requests (the three newest, up to 600 characters each),
- the tool failures (the eight newest, up to 240 characters each),
- identifiers that the summary does not already contain (up to twelve, newest first).

The whole summary is capped at 16,000 characters, so a runaway answer cannot eat the window.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from nodmix.compaction.prompts import SAFEGUARD_HEADINGS
from nodmix.messages import AssistantMessage, Message, ToolResultMessage, UserMessage

SUMMARY_CAP_CHARS: Final = 16_000
RECENT_ASKS: Final = 3
RECENT_ASK_CHARS: Final = 600
MAX_TOOL_FAILURES: Final = 8
TOOL_FAILURE_CHARS: Final = 240
MAX_IDENTIFIERS: Final = 12

_IDENTIFIER = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|https?://[^\s<>\"'`)\]]+"
    r"|\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{2,5})?\b"
    r"|\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b"
    r"|\b[a-z][\w-]*(?:\.[\w-]+)*:\d{2,5}\b"
    r"|(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}\b"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"
)


def missing_headings(summary: str) -> list[str]:
    """Required safeguard headings that do not appear on a line of their own."""
    present = {line.strip() for line in summary.splitlines()}
    return [h for h in SAFEGUARD_HEADINGS if h not in present]


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def recent_asks(messages: Sequence[Message], limit: int = RECENT_ASK_CHARS) -> list[str]:
    """The newest user requests among `messages`, oldest of them first, clipped to `limit`."""
    asks: list[str] = []
    for message in reversed(messages):
        if isinstance(message, UserMessage) and message.text.strip():
            asks.append(_clip(message.text, limit))
            if len(asks) == RECENT_ASKS:
                break
    return asks[::-1]


def tool_failures(messages: Sequence[Message]) -> list[str]:
    """The newest failed tool results among `messages`, oldest of them first, clipped."""
    failures: list[str] = []
    for message in reversed(messages):
        if isinstance(message, ToolResultMessage) and message.is_error:
            failures.append(f"{message.tool_name}: {_clip(message.text, TOOL_FAILURE_CHARS)}")
            if len(failures) == MAX_TOOL_FAILURES:
                break
    return failures[::-1]


def extract_identifiers(messages: Sequence[Message], summary: str) -> list[str]:
    """Identifiers the user and the assistant used that `summary` does not contain, newest first.

    Tool results are skipped: they are full of incidental hashes and paths, and what mattered
    from them shows up again in what the assistant said or called next.
    """
    found: list[str] = []
    seen: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            texts = [message.text]
        elif isinstance(message, AssistantMessage):
            texts = [message.text, *(str(c.arguments) for c in message.tool_calls)]
        else:
            continue
        for text in texts:
            for match in _IDENTIFIER.finditer(text):
                value = match.group(0).rstrip(".,;:")
                if value in seen or value in summary:
                    continue
                seen.add(value)
                found.append(value)
                if len(found) == MAX_IDENTIFIERS:
                    return found
    return found


def supplement(
    messages: Sequence[Message],
    summary: str,
    *,
    identifiers: bool,
    cap_chars: int = SUMMARY_CAP_CHARS,
) -> str:
    """Verbatim sections to append to a safeguard summary (empty when there is nothing).

    On small context windows (`cap_chars` below the default cap) the quoted requests shrink
    in proportion, so the supplement never crowds out the summary itself.
    """
    sections: list[str] = []
    ask_chars = max(120, RECENT_ASK_CHARS * min(cap_chars, SUMMARY_CAP_CHARS) // SUMMARY_CAP_CHARS)
    asks = recent_asks(messages, ask_chars)
    if asks:
        sections.append(
            "Latest user messages in this stretch (verbatim, clipped):\n"
            + "\n".join(f"- {a}" for a in asks)
        )
    failures = tool_failures(messages)
    if failures:
        sections.append("Tool failures:\n" + "\n".join(f"- {f}" for f in failures))
    if identifiers:
        ids = extract_identifiers(messages, summary)
        if ids:
            sections.append(
                "Identifiers mentioned (verbatim):\n" + "\n".join(f"- {i}" for i in ids)
            )
    return "\n\n".join(sections)


def cap_summary(summary: str, extra: str = "", cap_chars: int = SUMMARY_CAP_CHARS) -> str:
    """`summary` plus `extra`, with the summary shortened so the whole fits `cap_chars`."""
    room = cap_chars - (len(extra) + 2 if extra else 0)
    room = max(cap_chars // 4, room)
    if len(summary) > room:
        summary = summary[:room].rstrip() + "\n[... summary shortened to fit ...]"
    return f"{summary}\n\n{extra}" if extra else summary
