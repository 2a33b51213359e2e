"""`AnthropicProvider`: the Anthropic Messages adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing

import httpx2

from nodmix.providers.anthropic.errors import error_from_response
from nodmix.providers.anthropic.mapping import API, build_payload, payload_tool_names
from nodmix.providers.anthropic.stream import EventParser, parse_message
from nodmix.providers.base import ModelEvent, ModelRequest
from nodmix.providers.debug import DebugSettings
from nodmix.providers.guard import check_tool_surface
from nodmix.providers.limits import CallLimits, OutputBudget
from nodmix.providers.transport import JSON_EVENT, TransportProvider

ANTHROPIC_VERSION = "2023-06-01"


def messages_url(base_url: str) -> str:
    """`{base_url}/v1/messages`, tolerating a base URL that already ends in `/v1`."""
    root = base_url.rstrip("/")
    return f"{root}/messages" if root.endswith("/v1") else f"{root}/v1/messages"


class AnthropicProvider(TransportProvider):
    """Streams responses from `POST {base_url}/v1/messages`.

    Args:
        name: Provider id used in messages and errors.
        base_url: API root without the version, e.g. `https://api.anthropic.com`.
        api_key: Sent as `x-api-key`.
        headers: Extra headers for every request (`anthropic-beta`, proxies).
        timeout: Seconds for every phase, or a full `httpx2.Timeout`.
        debug: What to log about requests (see `nodmix.providers.debug`).
        client: An HTTP client to use instead of creating one (the caller closes it).
        limits: Connect and idle timeouts (see `nodmix.providers.limits`); wins over
            `timeout`.
    """

    def __init__(
        self,
        *,
        name: str = "anthropic",
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx2.Timeout | float | None = None,
        debug: DebugSettings | None = None,
        client: httpx2.AsyncClient | None = None,
        limits: CallLimits | None = None,
    ) -> None:
        self._url = messages_url(base_url)
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
        return self._url.removesuffix("/messages") + "/models"

    @property
    def api(self) -> str:
        """The wire API, `anthropic-messages`."""
        return API

    @property
    def url(self) -> str:
        """The Messages endpoint requests go to."""
        return self._url

    def request_headers(self) -> dict[str, str]:
        """Headers of every request, credentials included (used by `nodmix doctor` probes)."""
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
        headers.update(self._headers)
        return headers

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Send `request` and yield its events as they stream in.

        Raises:
            ProviderError: Mapped HTTP, transport and in-stream failures, and the code-mode
                tool surface check (raised before anything is sent).
        """
        payload = build_payload(request)
        tool_names = payload_tool_names(payload)
        check_tool_surface(tool_names, request.expected_tool_names, provider=self._name)
        log = self._transport.request_log([self._api_key or "", *self._headers.values()])
        log.payload(payload, tool_names)
        parser = EventParser(provider=self._name, budget=OutputBudget(request.max_output_bytes))
        events = self._transport.events(
            self._url,
            headers=self.request_headers(),
            payload=payload,
            log=log,
            limits=self._transport.limits_for(request),
        )
        # aclosing: an early `return` (or a consumer that stops) must close the HTTP response.
        async with aclosing(events):
            async for sse in events:
                if sse.event == JSON_EVENT:
                    for event in parse_message(sse.data, provider=self._name):
                        yield event
                    return
                for event in parser.feed(sse.event, sse.data):
                    yield event
                if parser.cut:
                    # Over the byte cap: stop reading (closing the response) and end the reply.
                    for event in parser.cut_short():
                        yield event
                    return
        for event in parser.finish():
            yield event
