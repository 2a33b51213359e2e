"""The OpenAI Responses API: `POST /v1/responses`, streamed (SSE) or not.

A response is one agent turn, like a chat completion (see `responses_mapping` for how a
request maps to a session and a prompt): the agent's own tools run inside the gateway, the
client's tools end the response with `function_call` output items, and `previous_response_id`
continues the session of an earlier stored response (`session_pointers`).

A streamed response sends the Responses event types (`response.created`,
`response.output_text.delta`, `response.output_item.done`, `response.completed`, ...), each
an SSE `event:` line and a `data:` object with its `sequence_number`. As for chat
completions, headers wait for the first text (or the end of the turn), so an early failure is
a plain HTTP error; a failure after that ends the stream with `response.failed`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from nodmix.events import EventSink
from nodmix.gateway.client_tools import arguments_json, client_tools, tool_choice
from nodmix.gateway.errors import APIError, classify
from nodmix.gateway.http_runs import StartTurn, run_to_end, start_text_stream
from nodmix.gateway.media_parts import save_media, seeded_history
from nodmix.gateway.media_writes import MediaWrites, refuse_oversized, removed_if_refused
from nodmix.gateway.models_api import resolve_model
from nodmix.gateway.openai_api import (
    SESSION_HEADER,
    continued_session,
    summary,
)
from nodmix.gateway.openai_mapping import SYSTEM_NOTE_TYPE
from nodmix.gateway.responses_mapping import ResponseObject, parse_request, turn_input
from nodmix.gateway.runs import ActiveRun
from nodmix.gateway.seeding import HistorySeed, dropped_if_refused
from nodmix.gateway.state import gateway_of
from nodmix.messages import ToolCallBlock
from nodmix.runtime.client_results import ClientTurn
from nodmix.sessions.keys import fresh_session_name


async def create_response(request: Request) -> Response:
    """`POST /v1/responses`: one agent turn."""
    gateway = gateway_of(request)
    body = parse_request(await request.body())
    agent, model = resolve_model(gateway, body.model)
    tools = client_tools(body.tools)
    choice, disable_tools = tool_choice(body.tool_choice, tools)
    turn = turn_input(body)
    named: str | None = None
    if body.previous_response_id:
        named = gateway.responses.session_of(body.previous_response_id)
        if named is None:
            raise APIError(
                status=404,
                message=f"previous response {body.previous_response_id!r} not found (only "
                "responses created with store: true can be continued)",
                code="previous_response_not_found",
                param="previous_response_id",
            )
    named = named or request.headers.get(SESSION_HEADER) or body.user
    if turn.results is not None and not named:
        named = continued_session(gateway, turn.results)
    key = gateway.session_key(agent, named or fresh_session_name())
    client = ClientTurn(tools=tools, tool_choice=choice, results=turn.results)
    response = ResponseObject(body)
    if turn.results is None:
        refuse_oversized(gateway.runtime, agent, model, turn.prompt)
    writes = MediaWrites(agent.workspace, gateway.inbox_claims)
    async with removed_if_refused(writes, dropped_if_refused(gateway.runtime, agent, key)):
        files = await save_media(gateway, agent, turn.media, writes)
        history = await seeded_history(gateway, agent, turn.history, writes)
        if turn.note or history:
            seeded = HistorySeed(turn.note, history, SYSTEM_NOTE_TYPE, writes)
            client = msgspec.structs.replace(client, seed=seeded)

        def start(emit: EventSink) -> ActiveRun:
            return gateway.start_turn(
                turn.prompt,
                files=files,
                agent=agent,
                session_key=key,
                emit=emit,
                origin="http",
                model=model,
                disable_tools=disable_tools,
                after=None if named else lambda: gateway.stateless.created(agent.id),
                client=client,
            )

        def finished(calls: Sequence[ToolCallBlock]) -> None:
            for call in calls:
                gateway.client_calls.remember(call.id, key)
            if body.store:
                gateway.responses.remember(response.id, key)

        headers = {SESSION_HEADER: key}
        if body.stream:
            return await _stream(response, start, headers, finished)
        outcome = await run_to_end(request, start)
    reply, stop, usage, calls = summary(outcome)  # a model error: the prompt was recorded
    finished(calls)
    out = response.body(
        status="completed", output=response.output(reply, calls), usage=usage, stop_reason=stop
    )
    return JSONResponse(out, headers=headers)


async def _stream(
    response: ResponseObject,
    start: StartTurn,
    headers: dict[str, str],
    finished: Callable[[Sequence[ToolCallBlock]], None],
) -> Response:
    run, receive = await start_text_stream(start)
    return StreamingResponse(
        _events(response, run, receive, finished),
        media_type="text/event-stream",
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


class _Sequencer:
    """Numbers the events of one stream."""

    def __init__(self) -> None:
        self.number = 0

    def __call__(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.number, **fields}
        self.number += 1
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return f"event: {kind}\ndata: {data}\n\n".encode()


async def _events(
    response: ResponseObject,
    run: ActiveRun,
    texts: MemoryObjectReceiveStream[str],
    finished: Callable[[Sequence[ToolCallBlock]], None],
) -> AsyncIterator[bytes]:
    event = _Sequencer()
    streamed, opened = "", False
    message = {"item_id": response.message_id, "output_index": 0, "content_index": 0}
    try:
        yield event("response.created", response=response.body(status="in_progress"))
        yield event("response.in_progress", response=response.body(status="in_progress"))
        async with texts:
            async for text in texts:
                while True:  # deltas that arrived together go out as one event
                    try:
                        text += texts.receive_nowait()
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                if not opened:
                    opened = True
                    for chunk in _open_message(event, response):
                        yield chunk
                streamed += text
                yield event("response.output_text.delta", **message, delta=text, logprobs=[])
        try:
            reply, stop, usage, calls = summary(await run.result())
        except Exception as exc:
            error = classify(exc)
            failed = response.body(
                status="failed", error={"code": error.code, "message": error.message}
            )
            yield event("response.failed", response=failed)
            return
        if not opened and (reply or not calls):  # a command's message, or an empty answer
            streamed = reply
            for chunk in _open_message(event, response):
                yield chunk
            yield event("response.output_text.delta", **message, delta=reply, logprobs=[])
            opened = True
        output: list[dict[str, Any]] = []
        if opened:
            item = response.message_item(streamed)
            output.append(item)
            yield event("response.output_text.done", **message, text=streamed, logprobs=[])
            part = response.text_part(streamed)
            yield event("response.content_part.done", **message, part=part)
            yield event("response.output_item.done", output_index=0, item=item)
        for call in calls:
            index = len(output)
            item = response.call_item(call)
            yield event(
                "response.output_item.added",
                output_index=index,
                item=response.call_item(call, "in_progress"),
            )
            args = {"item_id": item["id"], "output_index": index}
            yield event("response.function_call_arguments.delta", **args, delta=item["arguments"])
            yield event(
                "response.function_call_arguments.done", **args, arguments=arguments_json(call)
            )
            yield event("response.output_item.done", output_index=index, item=item)
            output.append(item)
        finished(calls)
        final = response.body(status="completed", output=output, usage=usage, stop_reason=stop)
        yield event(f"response.{final['status']}", response=final)
    finally:
        # The client went away (or the stream ended): a turn still running is aborted.
        run.cancel()


def _open_message(event: _Sequencer, response: ResponseObject) -> list[bytes]:
    return [
        event(
            "response.output_item.added",
            output_index=0,
            item=response.message_item("", "in_progress"),
        ),
        event(
            "response.content_part.added",
            item_id=response.message_id,
            output_index=0,
            content_index=0,
            part=response.text_part(""),
        ),
    ]
