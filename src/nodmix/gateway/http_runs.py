"""Running one HTTP turn to its end or as a text stream, shared by the OpenAI-compatible
endpoints (`/v1/chat/completions`, `/v1/responses`).

A request handler hands over `start`, which starts the turn with an event sink. Either way
a client that goes away cancels the turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.requests import Request

from nodmix.events import EventSink, RunEvent, TextDeltaEvent
from nodmix.gateway.runs import ActiveRun

StartTurn = Callable[[EventSink], ActiveRun]


async def cancel_on_disconnect(request: Request, run: ActiveRun) -> None:
    # The body has been read, so the next ASGI message is the client hanging up.
    while (await request.receive())["type"] != "http.disconnect":
        pass
    run.cancel()


def ignore(event: RunEvent) -> None:
    """Non-streamed completions need no events."""


async def run_to_end(request: Request, start: StartTurn) -> Any:
    """Run the turn without streaming and return its outcome (cancelled on hang-up)."""
    run = start(ignore)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_on_disconnect, request, run)
            await run.done.wait()
            group.cancel_scope.cancel()
        return await run.result()
    finally:
        run.cancel()


async def start_text_stream(start: StartTurn) -> tuple[ActiveRun, MemoryObjectReceiveStream[str]]:
    """Start the turn and wait for its first text (or its end); return it and its text deltas.

    A turn that fails before any text raises here, so the client gets a plain HTTP error.
    """
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    first_text = anyio.Event()

    def emit(event: RunEvent) -> None:
        if isinstance(event, TextDeltaEvent) and event.text:
            first_text.set()
            send.send_nowait(event.text)

    def done() -> None:
        first_text.set()
        send.close()

    run = start(emit)
    run.on_done(done)
    try:
        await first_text.wait()
        if run.done.is_set():
            await run.result()  # a failure before any text is a plain HTTP error
    except BaseException:
        run.cancel()
        receive.close()
        raise
    return run, receive
