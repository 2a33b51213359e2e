"""What one API request added to an agent's `inbox/`, removed again when it is refused.

Images and audio of an OpenAI-compatible request are saved before its turn starts (the turn
reads them from the workspace), so a request the gateway then refuses (an unusable image next
to a good one, a message too long for the model's window) would leave files nobody refers
to. `MediaWrites` lists the files a request created (a content-named file it merely reused
belongs to an earlier request and is never removed), and `removed_if_refused` deletes them when
the request ends in a refusal: the prompt's files always, the seeded history's unless the
session recorded that history (then its transcript refers to them). `InboxClaims` counts the
requests using each file, so a concurrent request that reuses the same content-named file
keeps it.

`refuse_oversized` comes first: a message whose text alone cannot fit the model's window is
refused before any file is saved. The turn then checks the complete budget (with the tool
definitions and the system prompt) before it records anything, the client's earlier
conversation included (`seeding`), so that later refusal leaves only the files above, which
are removed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import anyio

from nodmix.agents import AgentProfile
from nodmix.errors import NodmixError, PromptTooLargeError, WorkspaceEscapeError
from nodmix.gateway.errors import APIError
from nodmix.loop.window import ensure_prompt_fits
from nodmix.media.files import remove_saved
from nodmix.messages import user_message
from nodmix.runtime import Runtime

log = logging.getLogger("nodmix.gateway")


def refuse_oversized(runtime: Runtime, agent: AgentProfile, model: str | None, text: str) -> None:
    """Refuse a prompt whose text alone is larger than the model's window.

    Raises:
        PromptTooLargeError: it is (the turn would refuse it too, after the files were saved).
    """
    try:
        ref = runtime.model_refs(agent, model)[0]
        window = runtime.compaction.settings(agent, ref).context_window
    except NodmixError:
        return  # an unknown model: the turn reports it
    ensure_prompt_fits(user_message(text), context_window=window, tools=(), model=ref)


class InboxClaims:
    """How many running requests use each saved file (per gateway)."""

    def __init__(self) -> None:
        self._count: Counter[tuple[Path, str]] = Counter()

    def claim(self, workspace: Path, path: str) -> None:
        self._count[(workspace, path)] += 1

    def release(self, workspace: Path, path: str) -> bool:
        """Drop one claim; whether no request uses the file any more."""
        key = (workspace, path)
        self._count[key] -= 1
        if self._count[key] > 0:
            return False
        del self._count[key]
        return True


@dataclass(slots=True)
class MediaWrites:
    """The files one request saved (`created_*`) and used (`used`) in `workspace`."""

    workspace: Path
    claims: InboxClaims
    created_prompt: list[str] = field(default_factory=list)
    created_history: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    history_recorded: bool = False
    """Set when the session recorded the seeded history (its files are then kept)."""

    def use(self, path: str) -> None:
        self.claims.claim(self.workspace, path)
        self.used.append(path)

    def release(self, *, refused: bool) -> list[str]:
        """Drop this request's claims; the files to delete when it was `refused`."""
        created = set(self.created_prompt)
        if not self.history_recorded:
            created.update(self.created_history)
        free = [path for path in self.used if self.claims.release(self.workspace, path)]
        self.used.clear()
        return [path for path in dict.fromkeys(free) if path in created] if refused else []


Undo = Callable[[BaseException], Awaitable[None]]
"""More to take back when a request fails with this exception (it decides whether that is a
refusal it undoes); it never raises (`seeding.dropped_if_refused`)."""


def removed_if_refused(writes: MediaWrites, *undo: Undo) -> _RemovedIfRefused:
    """Run a request's body; when it is refused (an `APIError` or a prompt too large for the
    window), delete the files it created that nothing refers to, after `undo` has taken back
    whatever else the request left."""
    return _RemovedIfRefused(writes, undo)


class _RemovedIfRefused:
    """(A class, not `contextlib.asynccontextmanager`, which cannot re-raise the frozen
    `APIError`.)"""

    def __init__(self, writes: MediaWrites, undo: tuple[Undo, ...]) -> None:
        self.writes = writes
        self.undo = undo

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None and self.undo:
            with anyio.CancelScope(shield=True):
                for undo in self.undo:
                    await undo(exc)
        refused = isinstance(exc, APIError | PromptTooLargeError)
        doomed = self.writes.release(refused=refused)
        if doomed:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_remove, self.writes.workspace, doomed)


def _remove(workspace: Path, paths: list[str]) -> None:
    for path in paths:
        try:
            remove_saved(workspace, path)
        except (OSError, WorkspaceEscapeError) as exc:
            log.warning("could not remove %s of a refused request: %s", workspace / path, exc)
