"""Helpers for context-engine authors.

- `delegate_compaction_to_runtime(ctx, params)`: run Nodmix's built-in summarising compaction
  from your engine's `compact()` (the "delegating" pattern; pair it with
  `owns_compaction=False`). A no-op `compact()` would silently disable `/compact` and overflow
  recovery for your engine, so delegate when you do not compact yourself.
- `build_memory_system_prompt_addition(...)`: a ready-made `system_prompt_addition` that tells
  the model where its durable notes live and how to use them with the tools it has.

```python
from nodmix.context import sdk

class MyEngine:
    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    async def compact(self, params: CompactParams) -> CompactResult:
        return await sdk.delegate_compaction_to_runtime(self.ctx, params)
```
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Final

from nodmix.context.base import CompactParams, CompactResult, EngineContext

COMPACT_SERVICE: Final = "compact_with_runtime"
"""Name of the runtime service in `EngineContext.services`."""

MEMORY_FILE: Final = "MEMORY.md"
MEMORY_DIR: Final = "memory"
RECENT_DAILY_FILES: Final = 3


async def delegate_compaction_to_runtime(
    ctx: EngineContext, params: CompactParams
) -> CompactResult:
    """Compact with Nodmix's built-in summariser, exactly as the legacy engine does.

    Pass `params` through unchanged: it carries the runtime state the compactor needs.

    Returns:
        The compaction's result; `ok=False` with a reason when the runtime offers no compactor
        (an engine created outside a running Nodmix, as in some unit tests).
    """
    service = ctx.services.get(COMPACT_SERVICE)
    if service is None:
        return CompactResult(
            ok=False, compacted=False, reason="the runtime compaction service is not available"
        )
    compact: Callable[[CompactParams], Awaitable[CompactResult]] = service
    return await compact(params)


def build_memory_system_prompt_addition(
    *,
    workspace: Path | None,
    available_tools: Collection[str] = (),
) -> str | None:
    """Guidance on the agent's memory files, to return as `system_prompt_addition`.

    It names `MEMORY.md` (lasting facts) and `memory/<date>.md` (daily notes), lists the newest
    daily files that exist, and says how to read or update them with the tools the run has.
    The content of `MEMORY.md` itself is already part of Nodmix's system prompt, so it is not
    repeated here.

    Args:
        workspace: The agent workspace (`EngineContext.workspace_dir`); `None` gives `None`.
        available_tools: Tool names of the run (`AssembleParams.available_tools`).

    Returns:
        The text, or `None` when there is no workspace or no tool to use the files with.
    """
    if workspace is None:
        return None
    tools = set(available_tools)
    can_read = "read" in tools
    can_write = bool({"write", "edit"} & tools)
    if not (can_read or can_write):
        return None
    lines = [
        "Memory: durable notes live in your workspace. "
        f"{MEMORY_FILE} holds lasting facts, preferences and decisions; "
        f"{MEMORY_DIR}/YYYY-MM-DD.md holds what happened on a day."
    ]
    daily = _recent_daily(workspace)
    if daily:
        lines.append("Recent daily notes: " + ", ".join(daily) + ".")
    if can_read:
        lines.append("Read them when earlier work or a past decision matters to the task.")
    if can_write:
        lines.append(
            "When you learn something worth keeping beyond this conversation, update "
            f"{MEMORY_FILE} (edit it rather than repeating entries) or today's daily note."
        )
    return " ".join(lines)


def _recent_daily(workspace: Path) -> list[str]:
    folder = workspace / MEMORY_DIR
    try:
        names = sorted(p.name for p in folder.glob("*.md") if p.is_file())
    except OSError:
        return []
    return [f"{MEMORY_DIR}/{n}" for n in names[-RECENT_DAILY_FILES:]][::-1]
