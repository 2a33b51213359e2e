"""Retry with backoff before the first event; never after output started."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.abc
import pytest

from nodmix.config.schema import RetryConfig
from nodmix.errors import ProviderError, ProviderUnavailableError, RateLimitedError
from nodmix.providers.base import ModelEvent, ModelRequest, TextDelta
from nodmix.providers.fake import FunctionProvider, ModelError, ModelReply, ScriptedProvider
from nodmix.providers.retry import RetryPolicy, stream_with_retry
from tests.providers.providers_support import make_request, text_until_error

pytestmark = pytest.mark.anyio


class SleepRecorder:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def policy(sleeps: SleepRecorder, **kwargs: float) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps, rand=lambda: 0.5, **kwargs)  # type: ignore[arg-type]


async def drain(events: AsyncIterator[ModelEvent]) -> str:
    return "".join([e.text async for e in events if isinstance(e, TextDelta)])


async def test_outages_are_retried_with_exponential_backoff_until_success() -> None:
    provider = ScriptedProvider(
        [ModelError(500, "a"), ModelError(502, "b"), ModelError(503, "c"), ModelReply.text("ok")]
    )
    sleeps = SleepRecorder()
    assert await drain(stream_with_retry(provider, make_request(), policy(sleeps))) == "ok"
    assert sleeps.calls == [0.5, 1.0, 2.0]
    provider.assert_complete()


async def test_attempts_are_limited_and_the_last_error_propagates() -> None:
    provider = ScriptedProvider([ModelError(503, f"down {i}") for i in range(4)])
    sleeps = SleepRecorder()
    with pytest.raises(ProviderUnavailableError, match="down 3"):
        await drain(stream_with_retry(provider, make_request(), policy(sleeps)))
    assert len(provider.requests) == 4
    assert len(sleeps.calls) == 3


async def test_retry_after_is_honoured_and_capped() -> None:
    provider = ScriptedProvider(
        [
            ModelError(429, "wait 3", retry_after=3),
            ModelError(429, "wait long", retry_after=120),
            ModelReply.text("ok"),
        ]
    )
    sleeps = SleepRecorder()
    await drain(stream_with_retry(provider, make_request(), policy(sleeps)))
    assert sleeps.calls == [3.0, 30.0]


def test_backoff_is_capped_and_jittered() -> None:
    capped = RetryPolicy(rand=lambda: 0.5)
    error = ProviderUnavailableError("x")
    assert [capped.delay(n, error) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    low = RetryPolicy(rand=lambda: 0.0).delay(1, error)
    high = RetryPolicy(rand=lambda: 0.999).delay(1, error)
    assert low == pytest.approx(0.8)
    assert high == pytest.approx(1.2, abs=0.01)


@pytest.mark.parametrize(
    "error", [ModelError(401, "bad key"), ModelError(404, "no model"), ModelError(400, "bad")]
)
async def test_errors_the_user_must_fix_are_not_retried(error: ModelError) -> None:
    provider = ScriptedProvider([error, ModelReply.text("never")])
    sleeps = SleepRecorder()
    with pytest.raises(ProviderError) as info:
        await drain(stream_with_retry(provider, make_request(), policy(sleeps)))
    assert not info.value.retryable
    assert sleeps.calls == []
    assert provider.remaining == 1


async def test_errors_after_the_first_event_propagate_without_retry() -> None:
    provider = ScriptedProvider(
        [ModelError(529, "Overloaded", partial="Half"), ModelReply.text("second")]
    )
    sleeps = SleepRecorder()
    seen: list[str] = []
    with pytest.raises(ProviderUnavailableError):
        await text_until_error(stream_with_retry(provider, make_request(), policy(sleeps)), seen)
    assert "".join(seen) == "Half"
    assert sleeps.calls == []
    assert provider.remaining == 1


async def test_rate_limits_are_retried_too() -> None:
    provider = ScriptedProvider([ModelError(429, "slow"), ModelReply.text("ok")])
    sleeps = SleepRecorder()
    assert await drain(stream_with_retry(provider, make_request(), policy(sleeps))) == "ok"
    assert len(sleeps.calls) == 1


async def test_a_consumer_that_stops_early_closes_the_provider_stream() -> None:
    closed: list[bool] = []

    class Tracking(FunctionProvider):
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            try:
                async for event in super().stream(request):
                    yield event
            finally:
                closed.append(True)

    provider = Tracking(lambda request: ModelReply.text("a long answer in chunks"))
    events = stream_with_retry(provider, make_request())
    async for _ in events:
        break
    await events.aclose()  # type: ignore[attr-defined]
    assert closed == [True]


def test_policy_defaults_match_the_documented_budget() -> None:
    default = RetryPolicy()
    assert (default.attempts, default.base_delay, default.max_delay, default.max_retry_after) == (
        4,
        0.5,
        8.0,
        30.0,
    )


@pytest.mark.parametrize("status", [501, 400, 404, 422])
async def test_statuses_a_retry_cannot_fix_fail_at_once(status: int) -> None:
    provider = ScriptedProvider([ModelError(status, "no"), ModelReply.text("never")])
    sleeps = SleepRecorder()
    with pytest.raises(ProviderError):
        await drain(stream_with_retry(provider, make_request(), policy(sleeps)))
    assert len(provider.requests) == 1 and sleeps.calls == []


async def test_a_malformed_stream_fails_at_once_over_http() -> None:
    from anyio.abc import SocketStream

    from nodmix.errors import ProviderProtocolError
    from nodmix.providers.openai import OpenAIProvider

    hits: list[int] = []
    body = b"data: {not json\n\n"
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )

    async def answer(stream: SocketStream) -> None:
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                received += await stream.receive()
            hits.append(1)
            await stream.send(reply)

    sleeps = SleepRecorder()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, answer)
        async with OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1") as provider:
            with anyio.fail_after(10), pytest.raises(ProviderProtocolError, match="malformed"):
                await drain(stream_with_retry(provider, make_request(), policy(sleeps)))
        group.cancel_scope.cancel()
    assert hits == [1] and sleeps.calls == []


def test_provider_retry_settings_set_attempts_and_cap_every_wait() -> None:
    base = RetryPolicy()
    tuned = base.configured(RetryConfig(attempts=2, max_delay_seconds=3))
    assert tuned.attempts == 2
    assert tuned.delay(5, ProviderUnavailableError("down")) <= 3
    assert tuned.delay(0, RateLimitedError("slow", retry_after=120)) == 3
    assert base.configured(None) is base


async def test_retry_after_as_an_http_date_is_honoured() -> None:
    from nodmix.providers.errors import parse_retry_after

    now = 1_700_000_000.0
    headers = {"retry-after": "Tue, 14 Nov 2023 22:13:27 GMT"}  # now + 7 s
    assert parse_retry_after(headers, now=now) == pytest.approx(7.0)
