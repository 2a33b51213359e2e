"""How listings describe a session's place among subagents: its kind, the session that spawned
it and its run, read from the session index and the run records (for the CLI, which reads the
state directory without a running process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodmix.sessions.keys import session_kind
from nodmix.sessions.store_entry import SessionEntry
from nodmix.subagents.records import SubagentRun, run_id_of
from nodmix.subagents.store import SubagentStore, open_subagent_store


class SessionLineage:
    """Reads run records on demand (one store for a whole listing)."""

    def __init__(self, state_dir: Path, store: SubagentStore | None = None) -> None:
        self._store = store or open_subagent_store(state_dir)

    def run(self, key: str | None) -> SubagentRun | None:
        """The run behind a subagent's session key."""
        run_id = run_id_of(key) if key else None
        return self._store.get(run_id) if run_id else None

    def describe(self, key: str | None, entry: SessionEntry | None) -> dict[str, Any]:
        """`{kind, parent, run}` of a session (`run`: `{runId, status, depth, error?}` or None); the
        parent comes from the index, or from the run once the index has forgotten it."""
        run = self.run(key)
        parent = entry.spawned_by if entry is not None else None
        if parent is None and run is not None:
            parent = run.parent_key
        return {
            "kind": session_kind(key) if key else None,
            "parent": parent,
            "run": None if run is None else _run_view(run),
        }


def _run_view(run: SubagentRun) -> dict[str, Any]:
    view: dict[str, Any] = {"runId": run.run_id, "status": run.status, "depth": run.depth}
    if run.error and run.status != "completed":
        view["error"] = run.error  # why it failed, timed out or was cancelled
    return view
