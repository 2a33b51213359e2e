"""Direct-mode names for MCP tools: `<server>__<tool>`, safe for every model provider.

Providers accept tool names matching `[A-Za-z0-9_-]{1,64}`, while MCP server and tool names may
contain dots, spaces or slashes and be any length. The rules, in order:

1. Every character outside `[A-Za-z0-9_-]` becomes `-` (after trimming whitespace).
2. A fragment that does not start with a letter gets a prefix (`mcp-` for servers, `tool-` for
   tools); an empty fragment becomes the bare prefix word.
3. The server part is cut to 30 characters and the whole name to 64.
4. Collisions (compared case-insensitively, since some providers fold case) get `-2`, `-3`, …
   appended, shortening the base so that the suffix still fits.

Server names are assigned once for the whole configured set, in declaration order, so a
server's prefix never changes because another server failed to start or was disabled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SEPARATOR = "__"
"""Between the server part and the tool part of a direct-mode name."""
MAX_SERVER_CHARS = 30
"""Longest server part."""
MAX_NAME_CHARS = 64
"""Longest whole name (the common provider limit)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize_fragment(raw: str, fallback: str, max_chars: int | None = None) -> str:
    """Make one name fragment provider-safe.

    Args:
        raw: The server or tool name as the user or server spelled it.
        fallback: Prefix word for fragments that do not start with a letter (`mcp`, `tool`).
        max_chars: Cut the result to this many characters.

    Returns:
        A non-empty fragment of `[A-Za-z0-9_-]` characters that starts with a letter.
    """
    cleaned = _UNSAFE.sub("-", raw.strip()) or fallback
    if not cleaned[0].isalpha():  # only ASCII is left after the substitution
        cleaned = f"{fallback}-{cleaned}"
    return cleaned[:max_chars] if max_chars is not None else cleaned


def _with_suffix(base: str, n: int, budget: int) -> str:
    suffix = f"-{n}"
    return base[: max(1, budget - len(suffix))] + suffix


def assign_server_names(servers: Iterable[str]) -> dict[str, str]:
    """Give every configured server a unique, safe name part, in declaration order.

    Args:
        servers: Server names as configured (`mcp.servers` keys, in file order).

    Returns:
        A mapping from the configured name to its safe server part.
    """
    used: set[str] = set()
    out: dict[str, str] = {}
    for server in servers:
        base = sanitize_fragment(server, "mcp", MAX_SERVER_CHARS)
        candidate, n = base, 2
        while candidate.lower() in used:
            candidate, n = _with_suffix(base, n, MAX_SERVER_CHARS), n + 1
        used.add(candidate.lower())
        out[server] = candidate
    return out


class ToolNamer:
    """Hands out unique direct-mode tool names and remembers every name it gave out.

    Args:
        reserved: Names already taken in the run (core and plugin tools), so an MCP tool
            never shadows them.
    """

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._taken = {name.lower() for name in reserved}

    def name(self, server_part: str, tool: str) -> str:
        """Allocate the name of one tool.

        Args:
            server_part: The safe server part from `assign_server_names`.
            tool: The raw MCP tool name.

        Returns:
            `<server_part>__<tool part>`, unique among the names this namer has seen.
        """
        budget = max(1, MAX_NAME_CHARS - len(server_part) - len(SEPARATOR))
        base = sanitize_fragment(tool, "tool")[:budget]
        part, n = base, 2
        while f"{server_part}{SEPARATOR}{part}".lower() in self._taken:
            part, n = _with_suffix(base, n, budget), n + 1
        name = f"{server_part}{SEPARATOR}{part}"
        self._taken.add(name.lower())
        return name
