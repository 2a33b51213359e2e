"""How a turn that did not finish is written down: aborted or failed, never dangling.

A cancelled turn keeps what the model streamed with `stopReason: "aborted"`; a failed turn
(every model failed, the turn timed out) records an assistant entry with `stopReason:
"error"` and the error line, holding whatever was streamed. Either way every tool call without
a result gets an error result, so replay hands every provider a valid history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
)
from nodmix.providers.base import ModelSpec

ABORTED_RESULT = "The turn was cancelled before this tool call finished."
FAILED_RESULT = "The turn failed before this tool call finished."


class _Appendable(Protocol):
    def append_message(self, message: Message, *, parent_tool_call_id: str | None = None) -> Any:
        """Append one message to the transcript."""
        ...


class _PartialSource(Protocol):
    model: ModelSpec | None

    def partial(self) -> AssistantMessage | None:
        """What the current model streamed so far, or None."""
        ...

    def forget(self) -> None:
        """Drop the partial reply once it has been recorded."""
        ...


def record_abort(
    session: _Appendable, call: _PartialSource, pending: Mapping[str, ToolCallBlock]
) -> AssistantMessage | None:
    """Record a cancelled turn; returns the aborted partial reply, if one was streamed."""
    partial = call.partial()
    call.forget()
    open_calls = dict(pending)
    aborted = None
    if partial is not None:
        aborted = AssistantMessage(
            content=partial.content,
            provider=partial.provider,
            model=partial.model,
            usage=partial.usage,
            stop_reason="aborted",
        )
        session.append_message(aborted)
        open_calls = {c.id: c for c in aborted.tool_calls}
    close_calls(session, open_calls, ABORTED_RESULT)
    return aborted


def record_failure(
    session: _Appendable,
    call: _PartialSource,
    pending: Mapping[str, ToolCallBlock],
    error: Exception,
) -> dict[str, ToolCallBlock]:
    """Record a failed turn: an error entry (with any partial reply) and error results."""
    partial = call.partial()
    call.forget()
    model = call.model
    failed = AssistantMessage(
        content=partial.content if partial is not None else (),
        provider=model.provider if model is not None else "",
        model=model.id if model is not None else "",
        usage=partial.usage if partial is not None else Usage(),
        stop_reason="error",
        error_message=str(error),
    )
    session.append_message(failed)
    close_calls(session, {**pending, **{c.id: c for c in failed.tool_calls}}, FAILED_RESULT)
    return {}


def close_calls(session: _Appendable, calls: Mapping[str, ToolCallBlock], text: str) -> None:
    """Append an error result for each of `calls`."""
    for call in calls.values():
        session.append_message(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=(TextBlock(text=text),),
                is_error=True,
            )
        )
