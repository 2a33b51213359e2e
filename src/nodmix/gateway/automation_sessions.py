"""Retention of the sessions automation creates: every isolated cron run and every webhook
call gets its own session (`cron:<jobId>:<runId>`, `hook:<name>:<runId>`), so a job every
few minutes would bury the agent's session list. Each job (or webhook) keeps its newest
`automation.runsKept` sessions listed, like its run history; older ones are archived the way
one-shot API sessions are (`gateway/stateless.py`): the store entry goes, the transcript moves
to `sessions/archive/` on a worker thread. Pruning runs in batches."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from nodmix.automation.history import DEFAULT_RUNS_KEPT
from nodmix.errors import NodmixError
from nodmix.sessions.transcript import move_to_archive

if TYPE_CHECKING:
    from nodmix.runtime import Runtime

log = logging.getLogger("nodmix.gateway")


class RunSessions:
    """Counts automation sessions per job and archives the oldest beyond the limit."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._counts: dict[tuple[str, str], int] = {}

    @property
    def kept(self) -> int:
        """Sessions kept listed per job."""
        return self._runtime.config.automation.runs_kept or DEFAULT_RUNS_KEPT

    async def created(self, agent_id: str, key: str) -> None:
        """A run finished in session `key`; prune its job's old sessions when over the limit.
        Never raises: retention must not fail a run."""
        name = key.split(":", 2)[2] if key.startswith("agent:") else key
        parts = name.split(":")
        if len(parts) != 3 or parts[0] not in ("cron", "hook"):
            return  # a named session (main, a mapping's sessionKey) is the user's to keep
        prefix = f"agent:{agent_id}:{parts[0]}:{parts[1]}:"
        slot = (agent_id, prefix)
        kept = self.kept
        self._counts[slot] = self._counts.get(slot, kept) + 1
        if self._counts[slot] <= kept + max(1, kept // 10):
            return
        try:
            await anyio.to_thread.run_sync(self._prune, agent_id, prefix, kept)
        except (NodmixError, OSError):
            log.warning("could not archive old sessions of %s", prefix, exc_info=True)

    def _prune(self, agent_id: str, prefix: str, kept: int) -> None:
        sessions = self._runtime.sessions
        entries = sessions.store(agent_id).load()
        keys = sorted((e.updated_at, k) for k, e in entries.items() if k.startswith(prefix))
        excess = [k for _, k in keys[: max(0, len(keys) - kept)]]
        archived = sessions.archive(agent_id, excess)
        self._counts[(agent_id, prefix)] = len(keys) - len(archived)
        for path in archived.values():
            try:
                move_to_archive(path)
            except OSError:
                log.warning("could not move %s to the archive", path, exc_info=True)
