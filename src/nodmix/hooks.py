"""Lifecycle hooks plugins register: tool calls and compaction.

Hooks are plain async callables kept in typed lists on `Hooks`. `before_tool_call` hooks run in
registration order; the first one that blocks wins, and parameter rewrites chain. Hook failures
are logged and never crash a turn, except that a failing `before_tool_call` hook blocks the
call (fail closed: a policy hook that crashed must not silently allow the call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

import msgspec

from nodmix.messages import JsonObject
from nodmix.origin import TurnOrigin

ToolKind: TypeAlias = Literal["tool", "code_mode_exec", "code_mode_wait", "code_mode_nested"]


class ToolCallInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What hooks learn about a tool call."""

    tool_name: str
    tool_id: str
    """Catalog id, e.g. `nodmix:core:exec` or `mcp:time:get_current_time`."""
    params: JsonObject
    agent_id: str
    session_key: str
    session_id: str
    run_id: str
    call_id: str
    tool_kind: ToolKind = "tool"
    tool_input_kind: str | None = None
    """For code-mode cells: `javascript` or `typescript`."""
    parent_call_id: str | None = None
    owner: str | None = None
    """The plugin id, MCP server or `core` that owns the tool."""
    origin: TurnOrigin | None = None
    """The chat the turn came from (channel turns only)."""


class BeforeToolCallResult(msgspec.Struct, frozen=True, kw_only=True):
    """A `before_tool_call` hook's decision. Return `None` from the hook to allow unchanged."""

    block: bool = False
    reason: str | None = None
    """Shown to the model when the call is blocked."""
    params: JsonObject | None = None
    """Replacement parameters for the call."""


class AfterToolCallInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What `after_tool_call` hooks see once a call finished."""

    call: ToolCallInfo
    result_text: str
    is_error: bool
    details: Any = None
    duration_ms: float = 0.0
    blocked: bool = False


class CompactionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What compaction hooks see."""

    agent_id: str
    session_key: str
    session_id: str
    trigger: Literal["auto", "manual", "overflow", "budget"]
    tokens_before: int
    summary: str | None = None
    """Set for `after_compaction`."""
    tokens_after: int | None = None


BeforeToolCallHook: TypeAlias = Callable[[ToolCallInfo], Awaitable[BeforeToolCallResult | None]]
AfterToolCallHook: TypeAlias = Callable[[AfterToolCallInfo], Awaitable[None]]
CompactionHook: TypeAlias = Callable[[CompactionInfo], Awaitable[None]]


class Registered(msgspec.Struct, frozen=True):
    """A hook plus the plugin that registered it (so disabling the plugin removes it)."""

    owner: str
    hook: Any
    tools: frozenset[str] | None = None
    """For tool-call hooks: the names of the tools it looks at, None for every call. The hook
    runs only for those; a call no hook looks at may take a quicker path (code mode runs a
    quick tool on its sandbox worker, see `nodmix.tools.base.quick_form`)."""

    def concerns(self, tool_name: str) -> bool:
        """Whether the hook runs for calls of `tool_name`."""
        return self.tools is None or tool_name in self.tools


def any_concerns(hooks: list[Registered], tool_name: str) -> bool:
    """Whether one of the tool-call `hooks` runs for calls of `tool_name`."""
    return any(r.tools is None or tool_name in r.tools for r in hooks)


class Hooks(msgspec.Struct):
    """Every registered hook, by lifecycle point."""

    before_tool_call: list[Registered] = msgspec.field(default_factory=list)
    after_tool_call: list[Registered] = msgspec.field(default_factory=list)
    before_compaction: list[Registered] = msgspec.field(default_factory=list)
    after_compaction: list[Registered] = msgspec.field(default_factory=list)

    def remove_owner(self, owner: str) -> None:
        """Drop every hook a plugin registered."""
        names = ("before_tool_call", "after_tool_call", "before_compaction", "after_compaction")
        for name in names:
            kept = [r for r in getattr(self, name) if r.owner != owner]
            setattr(self, name, kept)
