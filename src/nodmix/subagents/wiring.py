"""How the composition root builds the subagents: the service over the runtime, its file store
under the state directory, and the session tools among the runtime's tool sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anyio.abc import TaskGroup

from nodmix.subagents.host import SubagentHost
from nodmix.subagents.service import Subagents
from nodmix.subagents.store import open_subagent_store
from nodmix.subagents.tools import SubagentTools


def open_subagents(
    host: SubagentHost, state_dir: Path, group: TaskGroup, tool_sources: list[Any]
) -> Subagents:
    """The subagent runs of a runtime (background runs go to `group`); `sessions_spawn` and
    the other session tools join `tool_sources`. The gateway recovers and tidies the runs on
    disk (`subagents.recovery.serve`)."""
    service = Subagents(host, open_subagent_store(state_dir), group)
    tool_sources.append(SubagentTools(service))
    return service
