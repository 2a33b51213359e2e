"""The `memory_search` and `memory_get` tools, and the tool source that offers them.

They ask the memory backend `plugins.slots.memory` selects (`nodmix.memory.base`): the
built-in index by default, or a plugin's.

With `memory.sessions`, past transcripts are searchable, but only from the owner's turns
(`nodmix.origin.is_owner_turn`): a group chat, a per-peer DM or an automation run searches
and reads the memory files alone, never the owner's conversations, and of the chats' notes
under `memory/peers/` only its own (`nodmix.security.workspace_guard.peer_notes`), so what
one chat noted does not turn up in another.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from nodmix.errors import PluginError
from nodmix.memory.base import BUILTIN_MEMORY_ID, MemoryBackend, MemoryRead, MemorySearch
from nodmix.memory.settings import MemorySettings
from nodmix.memory.sources import SESSIONS_PREFIX
from nodmix.messages import JsonObject
from nodmix.origin import TurnOrigin, is_owner_turn, sees_owner_memory
from nodmix.security.workspace_guard import PEERS_DIR, peer_notes
from nodmix.tools.base import FunctionTool, Tool, ToolContext, ToolResult

MAX_GET_LINES = 400
MAX_GET_CHARS = 40_000
MAX_SEARCH_RESULTS = 50
SESSIONS_DIR = SESSIONS_PREFIX.rstrip("/")

SEARCH_DESCRIPTION = (
    "Search your memory (MEMORY.md and memory/**/*.md{sessions}) for notes relevant to a "
    "question. Use it before answering about earlier work, decisions, dates, people, "
    "preferences or to-dos. Returns ranked snippets with path, line range and score; read more "
    "of a hit with memory_get."
)

SEARCH_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for, in your own words."},
        "maxResults": {"type": "integer", "minimum": 1, "maximum": 50},
        "minScore": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["query"],
    "additionalProperties": False,
}

GET_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "A path memory_search returned."},
        "from": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
        "lines": {"type": "integer", "minimum": 1, "description": "How many lines."},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def _another_chats(path: str, origin: TurnOrigin | None) -> bool:
    """Whether `path` (an index path) is a chat's notes file under `memory/peers/` that is
    not the notes file of `origin`'s chat."""
    pure = PurePosixPath(path.replace("\\", "/"))
    own = None if origin is None else peer_notes(origin)
    return pure.parts[: len(PEERS_DIR.parts)] == PEERS_DIR.parts and pure != own


def _not_own(path: str, origin: TurnOrigin | None) -> bool:
    """Whether `path` is anything but the chat's own notes file."""
    pure = PurePosixPath(path.replace("\\", "/"))
    return origin is None or pure != peer_notes(origin)


def _refusal(path: str, ctx: ToolContext) -> str | None:
    """Why the turn of `ctx` may not read `path` with `memory_get` (None: it may)."""
    if is_owner_turn(ctx.origin, ctx.agent_id, ctx.session_key):
        return None
    if PurePosixPath(path.replace("\\", "/")).parts[:1] == (SESSIONS_DIR,):
        return "past sessions are only readable from the owner's own chat."
    if _another_chats(path, ctx.origin):
        return (
            f"{path!r} is another chat's notes; only {peer_notes(ctx.origin)} is yours."
            if ctx.origin is not None
            else f"{path!r} is another chat's notes."
        )
    if not sees_owner_memory(ctx.origin, ctx.agent_id, ctx.session_key) and _not_own(
        path, ctx.origin
    ):
        own = f"; this chat's notes are {peer_notes(ctx.origin)}" if ctx.origin else ""
        return (
            f"{path!r} is the owner's memory, which this chat does not see "
            f"(memory.shareWith lists the chats that may){own}."
        )
    return None


BackendFor = Callable[[str], MemoryBackend]
"""The memory backend of an agent (raises `PluginError` when it cannot be resolved)."""


def memory_tools(settings: MemorySettings, backend_for: BackendFor) -> list[Tool]:
    """`memory_search` and `memory_get` over the calling agent's memory backend."""

    async def search(args: JsonObject, ctx: ToolContext) -> ToolResult:
        query = str(args.get("query", "")).strip()
        if not query:
            return ToolResult.error("memory_search needs a non-empty query.")
        max_results = args.get("maxResults")
        min_score = args.get("minScore")
        wanted = max_results if isinstance(max_results, int) else settings.max_results
        wanted = max(1, min(wanted, MAX_SEARCH_RESULTS))
        owner = is_owner_turn(ctx.origin, ctx.agent_id, ctx.session_key)
        try:
            found = await backend_for(ctx.agent_id).search(
                MemorySearch(
                    query=query,
                    max_results=wanted if owner else MAX_SEARCH_RESULTS,
                    min_score=float(min_score) if isinstance(min_score, int | float) else None,
                    session_key=ctx.session_key,
                )
            )
        except PluginError as exc:
            return ToolResult.error(f"memory search is unavailable: {exc}")
        hits = list(found.hits)
        if not owner:
            own_only = not sees_owner_memory(ctx.origin, ctx.agent_id, ctx.session_key)
            hits = [
                hit
                for hit in hits
                if hit.source != "sessions"
                and not _another_chats(hit.path, ctx.origin)
                and not (own_only and _not_own(hit.path, ctx.origin))
            ]
        payload: JsonObject = {
            "results": [hit.to_json() for hit in hits[:wanted]],
            "mode": found.mode,
        }
        if found.warning is not None:
            payload["warning"] = found.warning
        return ToolResult.text(json.dumps(payload, ensure_ascii=False, indent=1), details=payload)

    async def get(args: JsonObject, ctx: ToolContext) -> ToolResult:
        path = str(args.get("path", ""))
        start = args.get("from")
        count = args.get("lines")
        first = start if isinstance(start, int) and start > 0 else 1
        lines = min(count, MAX_GET_LINES) if isinstance(count, int) and count > 0 else MAX_GET_LINES
        refused = _refusal(path, ctx)
        if refused is not None:
            return ToolResult.error(refused)
        try:
            backend = backend_for(ctx.agent_id)
            got = await backend.read(MemoryRead(path=path, start=first, lines=lines))
        except PluginError as exc:
            return ToolResult.error(f"memory is unavailable: {exc}")
        except FileNotFoundError:
            if backend.info.id != BUILTIN_MEMORY_ID:
                return ToolResult.error(
                    f"{path!r} is not in memory; use a path memory_search returned."
                )
            return ToolResult.error(
                f"{path!r} is not a memory file (MEMORY.md, memory/**/*.md"
                f"{', sessions/*.jsonl' if settings.sessions else ''}) or does not exist."
            )
        except (OSError, UnicodeError) as exc:
            return ToolResult.error(f"cannot read {path!r}: {exc}")
        text, first, last = got.text, got.first, got.last
        if len(text) > MAX_GET_CHARS:
            text = text[:MAX_GET_CHARS] + "\n[… cut; ask for fewer lines]"
        details = {"path": path, "from": first, "to": last}
        header = f"{path} lines {first}-{last}" if last >= first else f"{path}: no such lines"
        return ToolResult.text(f"{header}\n{text}", details=details)

    sessions = ", past sessions" if settings.sessions else ""
    return [
        FunctionTool.create(
            search,
            name="memory_search",
            description=SEARCH_DESCRIPTION.format(sessions=sessions),
            parameters=SEARCH_PARAMETERS,
            label="Search memory",
        ),
        FunctionTool.create(
            get,
            name="memory_get",
            # Worded apart from `read`, so a catalog search for reading a file finds `read`.
            description="Fetch lines of a memory note, by a path memory_search returned.",
            parameters=GET_PARAMETERS,
            label="Memory lines",
        ),
    ]


class MemoryTools:
    """Tool source offering the memory tools when `memory.enabled` (the default)."""

    def __init__(self, settings: MemorySettings, backend_for: BackendFor) -> None:
        self._tools: Sequence[Tool] = (
            memory_tools(settings, backend_for) if settings.enabled else ()
        )

    async def list_tools(self) -> Sequence[Tool]:
        """The memory tools (none when memory is disabled)."""
        return self._tools
