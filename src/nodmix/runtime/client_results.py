"""Results of client tool calls, sent back by the application to continue a paused turn.

A turn that called a client tool stopped with `tool_calls` (see `loop.turn`). The client runs
the tools and sends their results; each one answers either

- a direct call: the last assistant message of the session called the tool and has no result
  for it yet, so the result is appended to the transcript and the model continues, or
- a call a code-mode program made: the engine holds it (`codemode.client_calls`), the result
  settles it, and the program receives it on the model's next `wait`.

A result that answers neither (a stale or made-up id) is refused before anything is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from nodmix.errors import SessionError
from nodmix.messages import AssistantMessage, ToolResultMessage
from nodmix.sessions import MessageEntry, Session
from nodmix.tools.base import Tool, ToolResult

if TYPE_CHECKING:
    from nodmix.codemode.engine import CodeModeEngine


class ClientTurn(msgspec.Struct, frozen=True, kw_only=True):
    """What the application that sent a turn adds to it."""

    tools: Sequence[Tool] = ()
    """Its tools (origin `client`): the turn stops when the model calls one."""
    tool_choice: str | None = None
    """`required` or a tool name for the first model call; `None` lets the model decide."""
    results: Sequence[ToolResultMessage] | None = None
    """Results of the client calls the previous turn stopped for: continue instead of a new
    prompt."""
    seed: Callable[[Session], None] | None = None
    """Records its earlier conversation into the session, before the prompt; the turn calls it
    only once the prompt fits the model's window, so a refused turn records nothing."""


def open_direct_calls(session: Session) -> dict[str, str]:
    """`{call id: tool name}` of the last assistant message's calls that have no result."""
    calls: dict[str, str] = {}
    for entry in session.entries:
        if not isinstance(entry, MessageEntry) or entry.parent_tool_call_id is not None:
            continue
        message = entry.message
        if isinstance(message, AssistantMessage):
            calls = {call.id: call.name for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage):
            calls.pop(message.tool_call_id, None)
        else:
            calls = {}
    return calls


def accept_client_results(
    session: Session, engine: CodeModeEngine | None, results: Sequence[ToolResultMessage]
) -> list[ToolResultMessage]:
    """Route each result; returns the ones to append to the transcript (direct calls).

    Raises:
        SessionError: a result answers no open call of this session (nothing is recorded).
    """
    direct = open_direct_calls(session)
    held = {c.id for c in engine.client_calls.pending(session.key)} if engine else set()
    for result in results:
        if result.tool_call_id not in direct and result.tool_call_id not in held:
            waiting = sorted({*direct, *held})
            hint = f" (waiting for: {', '.join(waiting)})" if waiting else ""
            raise SessionError(
                f"tool result for {result.tool_call_id!r} answers no open tool call of session "
                f"{session.key!r}{hint}"
            )
    appended: list[ToolResultMessage] = []
    for result in results:
        name = direct.get(result.tool_call_id)
        if name is not None:
            appended.append(
                ToolResultMessage(
                    tool_call_id=result.tool_call_id,
                    tool_name=name,
                    content=result.content,
                    is_error=result.is_error,
                )
            )
        elif engine is not None:
            engine.client_calls.settle(
                session.key,
                result.tool_call_id,
                ToolResult(content=result.content, is_error=result.is_error),
            )
    return appended
