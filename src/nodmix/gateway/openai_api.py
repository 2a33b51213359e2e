"""The OpenAI-compatible API: `POST /v1/chat/completions` (models: `models_api`).

A completion is one agent turn (see `openai_mapping` for how a request maps to a session and a
prompt). The agent's own tool calls and code-mode cells run inside the gateway; the client
sees only the assistant's text, and the calls of its own tools (`client_tools`), which end
the response with `finish_reason: "tool_calls"`. A streamed completion sends the text deltas
of every model step as they arrive, so interim text the model writes before using a tool is
part of the stream, while the non-streamed `content` is the final answer only.

Streaming waits for the first piece of text (or the end of the turn) before sending headers:
a failure before any text, which is when nearly all failures happen, still gets a real HTTP
status and an error body. A failure after text arrives ends the stream with an OpenAI-style
`data: {"error": ...}` event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from nodmix.events import EventSink
from nodmix.gateway.client_tools import arguments_json, client_tools, tool_choice
from nodmix.gateway.errors import APIError, bad_request, classify
from nodmix.gateway.http_runs import StartTurn, run_to_end, start_text_stream
from nodmix.gateway.media_parts import save_media, seeded_history
from nodmix.gateway.media_writes import MediaWrites, refuse_oversized, removed_if_refused
from nodmix.gateway.models_api import resolve_model
from nodmix.gateway.openai_mapping import (
    SYSTEM_NOTE_TYPE,
    ChatRequest,
    Completion,
    client_results,
    finish_reason,
    parse_request,
    prompt_parts,
    seed,
)
from nodmix.gateway.runs import ActiveRun
from nodmix.gateway.seeding import HistorySeed, dropped_if_refused
from nodmix.gateway.state import Gateway, gateway_of
from nodmix.messages import ToolCallBlock, ToolResultMessage, Usage
from nodmix.runtime import CommandOutcome, TurnOutcome
from nodmix.runtime.client_results import ClientTurn
from nodmix.sessions.keys import fresh_session_name

SESSION_HEADER = "x-nodmix-session-key"


def continued_session(gateway: Gateway, results: Sequence[ToolResultMessage]) -> str:
    """The session whose client tool calls `results` answer (a client that names none).

    Raises:
        APIError: 400 when no call is known (answered already, or from before a restart).
    """
    known = (gateway.client_calls.session_of(r.tool_call_id) for r in results)
    key = next((k for k in known if k is not None), None)
    if key is None:
        ids = ", ".join(repr(r.tool_call_id) for r in results)
        raise bad_request(
            f"no pending tool call has id {ids}; send the results to the session that made "
            f"the calls (the {SESSION_HEADER} header of that response)",
            param="messages",
        )
    return key


async def chat_completions(request: Request) -> Response:
    """`POST /v1/chat/completions`: one agent turn, streamed (SSE) or not."""
    gateway = gateway_of(request)
    chat = parse_request(await request.body())
    agent, model = resolve_model(gateway, chat.model)
    tools = client_tools(chat.tools)
    choice, disable_tools = tool_choice(chat.tool_choice, tools)
    results = client_results(chat)
    named = request.headers.get(SESSION_HEADER) or chat.user
    if results is not None and not named:
        named = continued_session(gateway, results)
    key = gateway.session_key(agent, named or fresh_session_name())
    prompt = prompt_parts(chat)
    note, parts = seed(chat) if results is None else (None, [])
    if results is None:
        refuse_oversized(gateway.runtime, agent, model, prompt.text)
    writes = MediaWrites(agent.workspace, gateway.inbox_claims)
    async with removed_if_refused(writes, dropped_if_refused(gateway.runtime, agent, key)):
        files = await save_media(gateway, agent, prompt.media, writes) if results is None else []
        history = await seeded_history(gateway, agent, parts, writes)
        seeded = HistorySeed(note, history, SYSTEM_NOTE_TYPE, writes) if note or history else None
        client = ClientTurn(tools=tools, tool_choice=choice, results=results, seed=seeded)

        def start(emit: EventSink) -> ActiveRun:
            return gateway.start_turn(
                prompt.text,
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

        def handed_out(calls: Sequence[ToolCallBlock]) -> None:
            for call in calls:
                gateway.client_calls.remember(call.id, key)

        headers = {SESSION_HEADER: key}
        if chat.stream:
            return await _stream(chat, start, headers, handed_out)
        outcome = await run_to_end(request, start)
    reply, stop, usage, calls = summary(outcome)  # a model error: the prompt was recorded
    handed_out(calls)
    body = Completion(chat.model).body(reply, finish_reason(stop), usage, calls)
    return JSONResponse(body, headers=headers)


def summary(
    outcome: TurnOutcome | CommandOutcome,
) -> tuple[str, str, Usage, list[ToolCallBlock]]:
    """`(reply, stop reason, usage, client tool calls)` of a finished turn or command.

    Raises:
        APIError: 502 for a turn the model ended with an error.
    """
    if isinstance(outcome, CommandOutcome):
        return outcome.message, "stop", Usage(), []
    result = outcome.result
    if result.stop_reason == "error":
        last = result.last_message
        detail = (last.error_message if last else None) or "the model returned an error"
        raise APIError(status=502, message=detail, kind="api_error", code="model_error")
    return result.reply, result.stop_reason, result.usage, list(result.client_calls)


async def _stream(
    chat: ChatRequest,
    start: StartTurn,
    headers: dict[str, str],
    handed_out: Callable[[Sequence[ToolCallBlock]], None],
) -> Response:
    run, receive = await start_text_stream(start)
    return StreamingResponse(
        _sse(
            Completion(chat.model),
            run,
            receive,
            include_usage=chat.include_usage,
            handed_out=handed_out,
        ),
        media_type="text/event-stream",
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


def tool_call_deltas(calls: Sequence[ToolCallBlock]) -> list[dict[str, Any]]:
    """The calls of a streamed response, each complete in one delta."""
    return [
        {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments_json(call)},
        }
        for index, call in enumerate(calls)
    ]


def _data(payload: Any) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


async def _sse(
    completion: Completion,
    run: ActiveRun,
    texts: MemoryObjectReceiveStream[str],
    *,
    include_usage: bool,
    handed_out: Callable[[Sequence[ToolCallBlock]], None],
) -> AsyncIterator[bytes]:
    try:
        yield _data(completion.chunk({"role": "assistant", "content": ""}))
        async with texts:
            async for text in texts:
                # Deltas that arrived together go out as one chunk: fewer writes, same text.
                while True:
                    try:
                        text += texts.receive_nowait()
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                if text:
                    yield _data(completion.chunk({"content": text}))
        try:
            outcome = await run.result()
            reply, stop, usage, calls = summary(outcome)
        except Exception as exc:
            yield _data(classify(exc).body())
            return
        if isinstance(outcome, CommandOutcome):
            yield _data(completion.chunk({"content": reply}))
        if calls:
            handed_out(calls)
            yield _data(completion.chunk({"tool_calls": tool_call_deltas(calls)}))
        yield _data(completion.chunk({}, finish_reason(stop)))
        if include_usage:
            yield _data(completion.usage_chunk(usage))
        yield b"data: [DONE]\n\n"
    finally:
        # The client went away (or the stream ended): a turn still running is aborted.
        run.cancel()
