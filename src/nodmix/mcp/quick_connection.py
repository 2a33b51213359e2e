"""Quick calls on one server connection: sent by the calling thread, finished there or on the loop.

`send_quick` runs on a sandbox worker: it sends the request through the live session's
`SideDoor`. The worker takes the answer when it comes while it waits (`QuickCall.result`);
otherwise it hands the request over (`QuickCall.hand_over`: parked under the call's key), and
the event loop's `call_tool` for the same call adopts it (`adopt_quick`), so the server sees
the request once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodmix.mcp.connection import ServerConnection
from nodmix.mcp.quick_calls import CANCELLED, QuickRequest, SideDoor, answer_result
from nodmix.mcp.results import error_result
from nodmix.messages import JsonObject
from nodmix.tools.base import ToolResult


class QuickCall:
    """A `tools/call` sent through a session's `SideDoor` (`tools.base.SentCall`)."""

    __slots__ = ("_connection", "_door", "_key", "_request", "_schema")

    def __init__(
        self,
        connection: ServerConnection,
        door: SideDoor,
        request: QuickRequest,
        key: tuple[str, ...],
        output_schema: JsonObject | None,
    ) -> None:
        self._connection = connection
        self._door = door
        self._request = request
        self._key = key
        self._schema = output_schema

    def answered(self) -> bool:
        return self._request.done.is_set()

    @property
    def answer_seconds(self) -> float | None:
        """From writing the request to reading its answer (the server's part), once answered."""
        request = self._request
        return None if request.settled_at is None else request.settled_at - request.sent_at

    def notify(self, callback: Callable[[], None]) -> None:
        request = self._request
        request.on_settle = callback
        if request.done.is_set():
            callback()

    def result(self) -> ToolResult | None:
        request = self._request
        if request.answer is None:
            # The connection closed: the loop's `call_tool` says why (it waits for the
            # session's owner to know), without sending the request again.
            self.hand_over()
            return None
        return answer_result(self._connection.name, request.tool, request.answer, self._schema)

    def hand_over(self) -> None:
        self._request.on_settle = None
        self._connection.parking.park(self._key, self._request, self._door)

    def cancel(self) -> None:
        request = self._request
        request.on_settle = None
        self._door.cancel(request, "cancelled")
        request.settle(None, CANCELLED)
        # Nobody takes it any more (kept, it would stay until its timeout).
        self._connection.parking.take(self._key, request.tool, request.arguments)


def send_quick(
    connection: ServerConnection,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    key: tuple[str, ...],
    output_schema: JsonObject | None,
) -> QuickCall | None:
    """Send the call through the live session's door; None (nothing sent) when it cannot."""
    door = connection.door
    if door is None:
        return None
    request = door.send(tool, arguments)
    if request is None:
        return None
    return QuickCall(connection, door, request, key, output_schema)


async def adopt_quick(
    connection: ServerConnection,
    tool: str,
    parked: tuple[QuickRequest, SideDoor],
    output_schema: JsonObject | None,
) -> ToolResult | None:
    """Await a parked request on the event loop: its result, or None when the call should
    go through the session after all (the server ran nothing: see `answer_result`)."""
    request, door = parked
    if request.tool != tool:  # (a key reused by another call: never mix their answers)
        door.cancel(request, "abandoned")
        return None
    if not await door.adopt(request):
        return error_result(
            f"MCP server {connection.name!r} did not answer tools/call {tool!r} "
            f"within {connection.timeout:g} s"
        )
    if request.failure == CANCELLED:
        return error_result(f"tools/call {tool!r} of MCP server {connection.name!r} was cancelled")
    if request.answer is None:
        reason = await connection.lost_reason()
        return error_result(f"MCP server {connection.name!r} {reason} during tools/call {tool!r}")
    return answer_result(connection.name, tool, request.answer, output_schema)
