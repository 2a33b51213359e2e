"""One model call of a turn: stream it, fall back along the chain, keep the partial answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from nodmix.config.schema import RetryConfig
from nodmix.errors import ProviderError
from nodmix.events import EventSink, ModelFallback, Notice, TextDeltaEvent, ThinkingDeltaEvent
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


ForModel = Callable[[ModelSpec], Sequence[Message]]
"""The request's messages in the form one model takes (images or notes about them)."""


class MediaView(Protocol):
    """Turns the image references of a request into what each model gets
    (`nodmix.media.resolver.ImageResolver`)."""

    async def prepare(
        self, messages: Sequence[Message], *, agent_id: str, workspace: Path
    ) -> ForModel: ...


class ReplyLimits(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's limits on each model request (`None`: the model's or provider's own)."""

    max_tokens: int | None = None
    max_output_bytes: int | None = None
    connect_timeout: float | None = None
    idle_timeout: float | None = None


def request_builder(
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    expected_tool_names: frozenset[str] | None = None,
    limits: ReplyLimits | None = None,
    *,
    tool_choice: str | None = None,
    for_model: ForModel | None = None,
) -> Callable[[ModelSpec], ModelRequest]:
    """Builds the same request for whichever model of the chain ends up answering.

    The output token limit is the agent's `maxTokens`, else the model's own; `for_model`
    gives each model the messages in the form it takes (images for vision models only).
    """
    limits = limits or ReplyLimits()

    def build(spec: ModelSpec) -> ModelRequest:
        return ModelRequest(
            model=spec,
            system=system,
            messages=list(messages if for_model is None else for_model(spec)),
            tools=list(tools),
            expected_tool_names=expected_tool_names,
            max_tokens=limits.max_tokens or spec.max_tokens,
            max_output_bytes=limits.max_output_bytes,
            connect_timeout=limits.connect_timeout,
            idle_timeout=limits.idle_timeout,
            tool_choice=tool_choice if tools else None,
        )

    return build


def stop_notice(message: AssistantMessage, request: ModelRequest, cut_at: int | None) -> str | None:
    """The line that tells the user why a reply ended early, or None for a normal stop."""
    label = f"{message.provider}/{message.model}"
    if message.stop_reason == "content_filter":
        return f"{label} stopped the reply: blocked by the provider's content filter"
    if message.stop_reason == "refusal":
        return f"{label} refused to answer"
    if message.stop_reason != "length":
        return None
    if cut_at is not None:
        return f"the reply was cut off at {cut_at} bytes (maxOutputBytes); what arrived was kept"
    return f"the reply hit the output limit of {request.max_tokens} tokens (maxTokens)"


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

    def forget(self) -> None:
        """Drop the current partial reply (it was recorded, or the step finished)."""
        self.builder = None

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
            # The router adds the provider's `retry` setting; other resolvers may not.
            retry_config: RetryConfig | None = getattr(resolved, "retry", None)
            policy = self._retry.configured(retry_config)
            self.model = spec
            self.builder = ResponseBuilder()
            streamed = False
            request = build(spec)
            try:
                async for event in stream_with_retry(provider, request, policy):
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
            message = self.builder.message(provider=provider.name, model=spec.id, api=provider.api)
            notice = stop_notice(message, request, self.builder.cut_at_bytes)
            if notice is not None:
                self._emit(Notice(level="warning", text=notice))
                if message.stop_reason == "length":
                    message = msgspec.structs.replace(message, error_message=notice)
            return message
        raise AssertionError("run() needs at least one model reference")
