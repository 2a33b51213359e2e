"""The HTTP side of the scripted model server: a Starlette app speaking OpenAI and Anthropic.

Incoming vendor JSON is mapped back to a `ModelRequest` with the adapters' own mapping
modules, handed to the respond function, and the reply is written with the adapters'
encoders, so what travels over the socket is what the real APIs send.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from nodmix.messages import AssistantMessage, JsonObject, TextBlock
from nodmix.providers.anthropic import encode as anthropic_encode
from nodmix.providers.anthropic import mapping as anthropic_mapping
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelStall, Respond, reply_message, run_respond
from nodmix.providers.openai import encode as openai_encode
from nodmix.providers.openai import mapping as openai_mapping
from nodmix.testing.audio_wire import AudioState, audio_routes

logger = logging.getLogger("nodmix.testing")

WireAPI: TypeAlias = Literal["openai-completions", "anthropic-messages"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request the scripted server received."""

    api: WireAPI
    path: str
    headers: dict[str, str]
    """Request headers, lowercase names."""
    body: JsonObject
    """The vendor JSON exactly as sent."""
    request: ModelRequest | None
    """The body mapped to our terms; `None` when it could not be mapped (answered 400)."""


@dataclass(slots=True, kw_only=True)
class WireState:
    """What the app shares with the server object that owns it."""

    respond: Respond
    api_key: str | None = None
    models: tuple[str, ...] = ("scripted",)
    requests: list[RecordedRequest] = field(default_factory=list)
    embedding_requests: list[JsonObject] = field(default_factory=list)
    """Bodies of `POST /v1/embeddings` requests (kept apart from model requests)."""
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    event_seconds: float = 0.0
    """Pause between the events of a streamed reply (a model that streams slowly)."""
    audio: AudioState = field(default_factory=AudioState)
    """Transcription and speech requests, and how transcriptions are answered."""

    def next_id(self, prefix: str) -> str:
        """A fresh id with a vendor-style prefix (`call_3`, `toolu_4`, `msg_5`)."""
        return f"{prefix}{next(self.counter)}"


def _sse(lines: Iterable[str], pause: float = 0.0) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for i, line in enumerate(lines):
            if pause and i:
                await anyio.sleep(pause)
            yield line.encode()

    return StreamingResponse(body(), media_type="text/event-stream")


def _data(payload: Any) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _named(event: str, payload: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _error_headers(error: ModelError) -> dict[str, str]:
    return {} if error.retry_after is None else {"retry-after": f"{error.retry_after:g}"}


class Vendor(Protocol):
    """The vendor-specific half of a model endpoint: request mapping and response shapes."""

    api: WireAPI
    id_prefix: str
    """Prefix of generated tool-call ids (`call_`, `toolu_`)."""

    def map_request(self, body: JsonObject) -> ModelRequest:
        """The vendor body in our terms; `ValueError` (answered 400) if it is not valid."""
        ...

    def authorized(self, request: Request) -> bool:
        """Whether the request carries the configured API key (always, without one)."""
        ...

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        """An error response with the vendor's error body."""
        ...

    def reply(self, message: AssistantMessage, body: JsonObject, stream: bool) -> Response:
        """The vendor response for `message`: an event stream or one JSON body."""
        ...

    def partial(self, error: ModelError, body: JsonObject) -> Response:
        """A `200` stream that delivers `error.partial` and then fails with `error`."""
        ...

    def opening(self, text: str, body: JsonObject) -> list[str]:
        """The SSE lines of a reply that streamed `text` and has not finished."""
        ...


async def handle(vendor: Vendor, state: WireState, request: Request) -> Response:
    """Answer one model request: parse, record, authorise, ask the script, encode."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return vendor.error(400, "the body is not valid JSON")
    if not isinstance(body, dict):
        return vendor.error(400, "the body must be a JSON object")
    headers = {k.lower(): v for k, v in request.headers.items()}
    problem = ""
    try:
        mapped: ModelRequest | None = vendor.map_request(body)
    except ValueError as exc:
        mapped, problem = None, str(exc)
    state.requests.append(
        RecordedRequest(
            api=vendor.api, path=request.url.path, headers=headers, body=body, request=mapped
        )
    )
    if not vendor.authorized(request):
        return vendor.error(401, "invalid API key")
    if mapped is None:
        return vendor.error(400, problem)
    try:
        reply = await run_respond(state.respond, mapped)
    except Exception as exc:  # a broken script must answer 500, not kill the server
        logger.exception("respond() failed")
        return vendor.error(500, f"respond() raised {type(exc).__name__}: {exc}")
    stream = body.get("stream") is True
    if isinstance(reply, ModelStall):
        return _stall(vendor, reply, body)
    if isinstance(reply, ModelError):
        if reply.partial and stream:
            return vendor.partial(reply, body)
        return vendor.error(reply.status, reply.message, _error_headers(reply))
    message = reply_message(
        reply, mapped, next_id=lambda: state.next_id(vendor.id_prefix), api=vendor.api
    )
    return vendor.reply(message, body, stream)


class OpenAIWire:
    """`POST /v1/chat/completions` shapes."""

    api: WireAPI = "openai-completions"
    id_prefix = "call_"

    def __init__(self, state: WireState) -> None:
        self.state = state

    def map_request(self, body: JsonObject) -> ModelRequest:
        """The vendor body in our terms."""
        return openai_mapping.request_from_payload(body)

    def authorized(self, request: Request) -> bool:
        """Whether the request carries the configured key."""
        key = self.state.api_key
        return key is None or request.headers.get("authorization") == f"Bearer {key}"

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        """An error response with the vendor's error body."""
        return JSONResponse(openai_encode.error_body(status, message), status, headers)

    def reply(self, message: AssistantMessage, body: JsonObject, stream: bool) -> Response:
        """The vendor response for `message`."""
        response_id = self.state.next_id("chatcmpl-")
        model = str(body["model"])
        if not stream:
            return JSONResponse(
                openai_encode.completion_body(message, response_id=response_id, model=model)
            )
        options = body.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = openai_encode.completion_chunks(
            message, response_id=response_id, model=model, include_usage=usage
        )
        return _sse([*map(_data, chunks), "data: [DONE]\n\n"], self.state.event_seconds)

    def partial(self, error: ModelError, body: JsonObject) -> Response:
        """A `200` stream that delivers `error.partial`, then fails."""
        failure = openai_encode.stream_error_chunk(error.status, error.message)
        return _sse([*self.opening(error.partial, body), _data(failure)], self.state.event_seconds)

    def opening(self, text: str, body: JsonObject) -> list[str]:
        """The chunks of a reply that streamed `text` and has not finished."""
        message = AssistantMessage(content=(TextBlock(text=text),) if text else ())
        chunks = openai_encode.completion_chunks(
            message, response_id=self.state.next_id("chatcmpl-"), model=str(body["model"])
        )
        # Drop the finish and usage chunks: the response is cut short.
        return [*map(_data, chunks[:-2])]


class AnthropicWire:
    """`POST /v1/messages` shapes."""

    api: WireAPI = "anthropic-messages"
    id_prefix = "toolu_"

    def __init__(self, state: WireState) -> None:
        self.state = state

    def map_request(self, body: JsonObject) -> ModelRequest:
        """The vendor body in our terms."""
        request = anthropic_mapping.request_from_payload(body)
        if not isinstance(body.get("max_tokens"), int):
            raise ValueError("max_tokens: Field required")  # as strict as the real API
        return request

    def authorized(self, request: Request) -> bool:
        """Whether the request carries the configured key."""
        key = self.state.api_key
        return key is None or request.headers.get("x-api-key") == key

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        """An error response with the vendor's error body."""
        return JSONResponse(anthropic_encode.error_body(status, message), status, headers)

    def reply(self, message: AssistantMessage, body: JsonObject, stream: bool) -> Response:
        """The vendor response for `message`."""
        message_id = self.state.next_id("msg_")
        model = str(body["model"])
        if not stream:
            return JSONResponse(
                anthropic_encode.message_body(message, message_id=message_id, model=model)
            )
        events = anthropic_encode.message_events(message, message_id=message_id, model=model)
        return _sse([_named(n, d) for n, d in events], self.state.event_seconds)

    def partial(self, error: ModelError, body: JsonObject) -> Response:
        """A `200` stream that delivers `error.partial`, then fails."""
        failure = anthropic_encode.error_body(error.status, error.message)
        opening = self.opening(error.partial, body)
        return _sse([*opening, _named("error", failure)], self.state.event_seconds)

    def opening(self, text: str, body: JsonObject) -> list[str]:
        """The events of a reply that streamed `text` and has not finished."""
        message = AssistantMessage(content=(TextBlock(text=text),))
        events = anthropic_encode.message_events(
            message, message_id=self.state.next_id("msg_"), model=str(body["model"])
        )
        # Keep the start and the text deltas; drop the block stop and the end.
        kept = events[:-3] if text else events[:2]
        return [_named(n, d) for n, d in kept]


def _stall(vendor: Vendor, stall: ModelStall, body: JsonObject) -> StreamingResponse:
    """A `200` event stream that delivers `stall.partial`, then never finishes."""
    opening = vendor.opening(stall.partial, body)

    async def forever() -> AsyncIterator[bytes]:
        for line in opening:
            yield line.encode()
        if stall.mode == "hang":
            await anyio.sleep_forever()
        while True:  # trickle: keep-alive comments and blank lines, never an event
            yield b": ping\n\n"
            await anyio.sleep(stall.interval)
            yield b"\n"
            await anyio.sleep(stall.interval)

    return StreamingResponse(forever(), media_type="text/event-stream")


def _models_endpoint(state: WireState) -> Callable[[Request], Any]:
    async def models(request: Request) -> Response:
        vendor: Vendor = (
            AnthropicWire(state) if "anthropic-version" in request.headers else OpenAIWire(state)
        )
        if not vendor.authorized(request):  # real providers also guard the model list
            return vendor.error(401, "invalid api key")
        if "anthropic-version" in request.headers:
            data = [{"type": "model", "id": m, "display_name": m} for m in state.models]
            return JSONResponse({"data": data, "has_more": False})
        listed = [
            {"id": m, "object": "model", "created": 0, "owned_by": "nodmix"} for m in state.models
        ]
        return JSONResponse({"object": "list", "data": listed})

    return models


def _endpoint(vendor: Vendor, state: WireState) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await handle(vendor, state, request)

    return endpoint


def _embeddings_endpoint(state: WireState) -> Callable[[Request], Awaitable[Response]]:
    """`POST /v1/embeddings`: deterministic vectors (`nodmix.testing.embeddings`)."""
    from nodmix.testing.embeddings import embed

    async def embeddings(request: Request) -> Response:
        vendor = OpenAIWire(state)
        if not vendor.authorized(request):
            return vendor.error(401, "invalid api key")
        try:
            body = await request.json()
            raw = body["input"]
        except (ValueError, KeyError, TypeError):
            return vendor.error(400, "expected a JSON body with 'input'")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return vendor.error(400, "'input' must be a string or a list of strings")
        state.embedding_requests.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": embed(text)}
            for i, text in enumerate(texts)
        ]
        model = body.get("model") or "scripted-embeddings"
        usage = {"prompt_tokens": sum(len(t.split()) for t in texts)}
        usage["total_tokens"] = usage["prompt_tokens"]
        return JSONResponse({"object": "list", "data": data, "model": model, "usage": usage})

    return embeddings


def build_app(state: WireState) -> Starlette:
    """The ASGI app: chat completions, messages, embeddings, audio and the model list, under
    `/v1`."""
    return Starlette(
        routes=[
            Route("/v1/chat/completions", _endpoint(OpenAIWire(state), state), methods=["POST"]),
            Route("/v1/messages", _endpoint(AnthropicWire(state), state), methods=["POST"]),
            Route("/v1/models", _models_endpoint(state), methods=["GET"]),
            Route("/v1/embeddings", _embeddings_endpoint(state), methods=["POST"]),
            *audio_routes(state.audio, OpenAIWire(state).authorized),
        ]
    )
