"""The runtime's security parts (exec policy, allowlist, approvals), built on first use.

Every turn is recorded in the turn registry from the start, but the parts themselves load on
the first `exec` call the gate must check, or the first time something asks for them (the
gateway's approval fan-out, a chat's `/approve`). A plain `nodmix agent --local` turn that
calls no shell command never imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from nodmix.config.schema import NodmixConfig
from nodmix.messages import JsonObject
from nodmix.security.turns import EXEC_TOOL_ID, TurnRegistry
from nodmix.tools.base import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from nodmix.security.parts import SecurityParts


class LazySecurity:
    """Holds the turn registry now and the security parts once they are needed; it is also the
    executor's gate (`ToolGate`)."""

    def __init__(self, state_dir: Path, config: Callable[[], NodmixConfig]) -> None:
        self.turns = TurnRegistry()
        self._state_dir = state_dir
        self._config = config
        self._parts: SecurityParts | None = None
        self._group: TaskGroup | None = None
        self._setups: list[Callable[[SecurityParts], None]] = []

    @property
    def parts(self) -> SecurityParts:
        """The parts, built (and set up) on first access."""
        if self._parts is None:
            from nodmix.security.parts import open_security

            parts = open_security(self._state_dir, self._config, turns=self.turns)
            if self._group is not None:
                parts.broker.attach(self._group)
            self._parts = parts
            setups, self._setups = self._setups, []
            for setup in setups:
                setup(parts)
        return self._parts

    def attach(self, group: TaskGroup) -> None:
        """Approval batches are presented as tasks of `group` (the runtime's background)."""
        self._group = group
        if self._parts is not None:
            self._parts.broker.attach(group)

    def when_built(self, setup: Callable[[SecurityParts], None]) -> None:
        """Run `setup` on the parts as soon as they exist (now, when they already do)."""
        if self._parts is not None:
            setup(self._parts)
        else:
            self._setups.append(setup)

    def concerns(self, tool: Tool) -> bool:
        """Only `exec` is checked; every other tool passes."""
        return tool.origin.id == EXEC_TOOL_ID

    async def check(self, tool: Tool, params: JsonObject, ctx: ToolContext) -> ToolResult | None:
        """The exec gate; other tools pass without loading anything."""
        if tool.origin.id != EXEC_TOOL_ID:
            return None
        return await self.parts.gate.check(tool, params, ctx)
