"""One model call of a turn: stream it, fall back along the chain, keep the partial answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from nodmix.errors import ProviderError
from nodmix.events import EventSink, ModelFallback, TextDeltaEvent, ThinkingDeltaEvent
from nodmix.messages import AssistantMessage, Message
from nodmix.providers.base import (
    ModelRequest,
    ModelSpec,
    Provider,
    ResponseBuilder,
    TextDelta,
    ThinkingDelta,
)
from nodmix.providers.retry import RetryPolicy, stream_with_retry
from nodmix.tools.base import ToolSpec


class ResolvedModelLike(Protocol):
    """A provider plus the model spec it serves."""

    @property
    def provider(self) -> Provider: ...

    @property
    def spec(self) -> ModelSpec: ...


class ModelResolver(Protocol):
    """Turns `provider/model` into a provider and a spec (the provider router)."""

    def resolve(self, ref: str) -> ResolvedModelLike: ...


def request_builder(
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    expected_tool_names: frozenset[str] | None = None,
) -> Callable[[ModelSpec], ModelRequest]:
    """Builds the same request for whichever model of the chain ends up answering."""

    def build(spec: ModelSpec) -> ModelRequest:
        return ModelRequest(
            model=spec,
            system=system,
            messages=list(messages),
            tools=list(tools),
            expected_tool_names=expected_tool_names,
        )

    return build


class ModelCall:
    """Runs one request against a chain of models.

    The next model is tried only for errors that are not the user's fault (rate limits, outages)
    and only if nothing was streamed yet, so the user never sees two half answers.
    """

    def __init__(
        self, resolver: ModelResolver, emit: EventSink, retry: RetryPolicy | None = None
    ) -> None:
        self._resolver = resolver
        self._emit = emit
        self._retry = retry or RetryPolicy()
        self.builder: ResponseBuilder | None = None
        self.model: ModelSpec | None = None

    def partial(self) -> AssistantMessage | None:
        """What the current model streamed so far (for an aborted turn), or None."""
        if self.builder is None or self.model is None:
            return None
        msg = self.builder.message(provider=self.model.provider, model=self.model.id, api="")
        return msg if msg.content else None

    async def run(
        self, refs: Sequence[str], build: Callable[[ModelSpec], ModelRequest]
    ) -> AssistantMessage:
        """Stream the request through the first model that answers."""
        for index, ref in enumerate(refs):
            resolved = self._resolver.resolve(ref)
            provider, spec = resolved.provider, resolved.spec
            self.model = spec
            self.builder = ResponseBuilder()
            streamed = False
            try:
                async for event in stream_with_retry(provider, build(spec), self._retry):
                    self.builder.add(event)
                    if isinstance(event, TextDelta):
                        streamed = True
                        self._emit(TextDeltaEvent(text=event.text))
                    elif isinstance(event, ThinkingDelta):
                        streamed = True
                        self._emit(ThinkingDeltaEvent(text=event.text))
            except ProviderError as exc:
                last = index == len(refs) - 1
                if streamed or last or not exc.fallback_eligible:
                    raise
                self._emit(ModelFallback(failed=ref, next=refs[index + 1], error=str(exc)))
                continue
            return self.builder.message(provider=provider.name, model=spec.id, api=provider.api)
        raise AssertionError("run() needs at least one model reference")
