"""What Nodmix keeps about one subagent run (`SubagentRun`), and the keys it runs under.

A run is born `queued` (waiting for a slot), becomes `running`, and ends `completed`,
`failed`, `timeout` or `cancelled`. A run nobody waits for (`wait: false`) is written to the
store before the spawn call answers `accepted`, at each change after that, and once its result
was announced to the requester (`announced`), so a restart finds every run it must still
finish or report. A run its requester waits for is written once, when it ends.
"""

from __future__ import annotations

import secrets
import time
from typing import Literal, TypeAlias

import msgspec

from nodmix.messages import Usage
from nodmix.origin import TurnOrigin

RunStatus: TypeAlias = Literal["queued", "running", "completed", "failed", "timeout", "cancelled"]
OPEN_STATUSES: frozenset[str] = frozenset({"queued", "running"})
SUBAGENT_PREFIX = "subagent:"
"""Session names of subagents: `agent:<agentId>:subagent:<id>`."""
RUN_PREFIX = "sub_"
"""Run ids: `sub_<id>`, the same `<id>` as the session name."""


class SubagentRun(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One subagent run (one task delegated by a requester's turn)."""

    run_id: str
    child_key: str
    """`agent:<agentId>:subagent:<id>`."""
    parent_key: str
    """The requester's session."""
    parent_run_id: str
    """The requester's turn."""
    depth: int
    """1 for a subagent of a top-level session, 2 for a subagent's subagent, ..."""
    task: str
    label: str | None = None
    model: str | None = None
    """The model override of the run (`provider/model`), if any."""
    timeout_seconds: float
    wait: bool
    """Whether the requester waits for the result (else it is announced)."""
    origin: TurnOrigin | None = None
    """The requester's origin: the chat an announcement goes to."""
    status: RunStatus = "queued"
    reply: str | None = None
    error: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    created_at: float = msgspec.field(default_factory=time.time)
    started_at: float | None = None
    ended_at: float | None = None
    restarts: int = 0
    """How often a restart of the process continued the run."""
    announced: bool = False
    archived: bool = False

    @property
    def child_agent(self) -> str:
        """The agent the subagent runs as."""
        return self.child_key.split(":", 2)[1]

    @property
    def parent_agent(self) -> str:
        """The requester's agent."""
        return self.parent_key.split(":", 2)[1]

    @property
    def is_open(self) -> bool:
        """Still queued or running."""
        return self.status in OPEN_STATUSES

    def result(self) -> dict[str, object]:
        """The run as `sessions_spawn` (with `wait`) and `sessions_send` report it."""
        out: dict[str, object] = {
            "status": self.status,
            "runId": self.run_id,
            "sessionKey": self.child_key,
        }
        if self.label:
            out["label"] = self.label
        if self.status == "completed":
            out["reply"] = self.reply or ""
        elif self.error:
            out["error"] = self.error
            if self.reply:
                out["reply"] = self.reply
        out["usage"] = {
            "input": self.usage.input,
            "output": self.usage.output,
            "totalTokens": self.usage.total_tokens or self.usage.input + self.usage.output,
        }
        if self.started_at is not None and self.ended_at is not None:
            out["durationMs"] = round((self.ended_at - self.started_at) * 1000)
        return out


def new_run_id() -> str:
    """A fresh run id (`sub_` and 16 hex digits)."""
    return RUN_PREFIX + secrets.token_hex(8)


def child_key_for(agent_id: str, run_id: str) -> str:
    """The session key of a run's subagent."""
    return f"agent:{agent_id}:{SUBAGENT_PREFIX}{run_id.removeprefix(RUN_PREFIX)}"


def run_id_of(session_key: str) -> str | None:
    """The run id of a subagent's session key, or None for any other key."""
    parts = session_key.split(":", 2)
    if len(parts) != 3 or not parts[2].startswith(SUBAGENT_PREFIX):
        return None
    rest = parts[2].removeprefix(SUBAGENT_PREFIX)
    if not rest or ":" in rest or not all(c in "0123456789abcdef" for c in rest):
        return None
    return RUN_PREFIX + rest


def is_subagent_key(session_key: str) -> bool:
    """Whether `session_key` names a subagent's session."""
    return run_id_of(session_key) is not None
