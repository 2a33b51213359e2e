"""`OpenAIProvider`: the chat-completions adapter (OpenAI, Ollama, vLLM, LM Studio, OpenRouter)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing

import httpx2

from nodmix.providers.base import ModelEvent, ModelRequest
from nodmix.providers.debug import DebugSettings
from nodmix.providers.guard import check_tool_surface
from nodmix.providers.limits import CallLimits, OutputBudget
from nodmix.providers.openai.errors import error_from_response
from nodmix.providers.openai.mapping import build_payload, payload_tool_names
from nodmix.providers.openai.stream import ChunkParser, parse_completion
from nodmix.providers.transport import JSON_EVENT, TransportProvider


class OpenAIProvider(TransportProvider):
    """Streams chat completions from `POST {base_url}/chat/completions`.

    Args:
        name: Provider id used in messages and errors (`openai`, `ollama`, `my-vllm`, ...).
        base_url: API root including the version, e.g. `https://api.openai.com/v1`.
        api_key: Sent as `Authorization: Bearer ...`; local servers need none.
        headers: Extra headers for every request (OpenRouter attribution, proxies).
        timeout: Seconds for every phase, or a full `httpx2.Timeout`.
        debug: What to log about requests (see `nodmix.providers.debug`).
        client: An HTTP client to use instead of creating one (the caller closes it).
        limits: Connect and idle timeouts (see `nodmix.providers.limits`); wins over
            `timeout`.
    """

    def __init__(
        self,
        *,
        name: str = "openai",
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx2.Timeout | float | None = None,
        debug: DebugSettings | None = None,
        client: httpx2.AsyncClient | None = None,
        limits: CallLimits | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._init_transport(
            name=name,
            api_key=api_key,
            headers=headers,
            map_error=lambda status, hdrs, body: error_from_response(name, status, hdrs, body),
            timeout=timeout,
            debug=debug,
            client=client,
            limits=limits,
        )

    @property
    def models_url(self) -> str:
        """The model-list endpoint."""
        return f"{self._base_url}/models"

    @property
    def api(self) -> str:
        """The wire API, `openai-completions`."""
        return "openai-completions"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._base_url

    def request_headers(self) -> dict[str, str]:
        """Headers of every request, credentials included (used by `nodmix doctor` probes)."""
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        headers.update(self._headers)
        return headers

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Send `request` and yield its events as they stream in.

        Raises:
            ProviderError: Mapped HTTP, transport and in-stream failures, and the code-mode
                tool surface check (raised before anything is sent).
        """
        payload = build_payload(request, base_url=self._base_url)
        tool_names = payload_tool_names(payload)
        check_tool_surface(tool_names, request.expected_tool_names, provider=self._name)
        secrets = [self._api_key or "", *self._headers.values()]
        log = self._transport.request_log(secrets)
        log.payload(payload, tool_names)
        parser = ChunkParser(provider=self._name, budget=OutputBudget(request.max_output_bytes))
        events = self._transport.events(
            f"{self._base_url}/chat/completions",
            headers=self.request_headers(),
            payload=payload,
            log=log,
            limits=self._transport.limits_for(request),
        )
        # aclosing: an early `return` (or a consumer that stops) must close the HTTP response.
        async with aclosing(events):
            async for sse in events:
                if sse.event == JSON_EVENT:
                    for event in parse_completion(sse.data, provider=self._name):
                        yield event
                    return
                for event in parser.feed(sse.data):
                    yield event
                if parser.cut:
                    # Over the byte cap: stop reading (closing the response) and end the reply.
                    for event in parser.cut_short():
                        yield event
                    return
        for event in parser.finish():
            yield event
