"""A quick, bounded check that models answer: one tiny real request each, all at once.

Used by `nodmix status`, `nodmix models test` and the onboarding wizard. Each probe asks for a
one-word reply with a small output limit and is cut off after `timeout` seconds, so a hung
server costs at most that long.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from nodmix.errors import NodmixError
from nodmix.messages import user_message
from nodmix.providers.base import ModelRequest, collect
from nodmix.providers.debug import display_url
from nodmix.providers.router import ProviderRouter
from nodmix.providers.transport import is_loopback

PROBE_PROMPT = "Reply with the single word: ok"
PROBE_TIMEOUT = 10.0
"""Seconds one probe may take, connection included."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """How one model answered the probe."""

    ref: str
    ok: bool
    detail: str
    """The reply's first line, or the error in one line."""
    latency_ms: float | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.ref,
            "answers": self.ok,
            "detail": self.detail,
            "latencyMs": None if self.latency_ms is None else round(self.latency_ms, 1),
        }


async def probe_model(
    router: ProviderRouter, ref: str, *, timeout: float = PROBE_TIMEOUT
) -> ProbeResult:
    """Send the probe to `ref` and report whether (and how fast) it answered."""
    started = time.monotonic()
    try:
        resolved = router.resolve(ref)
        request = ModelRequest(
            model=resolved.spec,
            system="You are a health check.",
            messages=(user_message(PROBE_PROMPT),),
            max_tokens=16,
            connect_timeout=min(timeout, 5.0),
            idle_timeout=timeout,
        )
        with anyio.fail_after(timeout):
            message = await collect(resolved.provider, request)
    except TimeoutError:
        return ProbeResult(ref, False, f"no answer within {timeout:g}s")
    except NodmixError as exc:
        return ProbeResult(ref, False, _first_line(str(exc)) or "the request failed")
    elapsed = (time.monotonic() - started) * 1000
    if message.stop_reason == "error":
        return ProbeResult(ref, False, _first_line(message.error_message or "error"), elapsed)
    return ProbeResult(ref, True, _first_line(message.text) or "(empty reply)", elapsed)


async def probe_models(
    router: ProviderRouter, refs: Sequence[str], *, timeout: float = PROBE_TIMEOUT
) -> dict[str, ProbeResult]:
    """Probe each distinct ref concurrently."""
    results: dict[str, ProbeResult] = {}

    async def one(ref: str) -> None:
        results[ref] = await probe_model(router, ref, timeout=timeout)

    async with anyio.create_task_group() as group:
        for ref in dict.fromkeys(refs):
            group.start_soon(one, ref)
    return results


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 160 else line[:157] + "..."


def unreachable(url: str, exc: Exception, timeout: float) -> str:
    """Why a request to `url` got no answer, in words (never an exception class name)."""
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return f"{url} did not answer within {timeout:g}s"
    if isinstance(exc, httpx2.ConnectError):
        if is_loopback(url):
            return f"nothing answers at {url} (connection refused): is the server running?"
        reason = re.sub(r"^\[Errno -?\d+\]\s*", "", _first_line(str(exc)))
        return f"cannot connect to {url}" + (f": {reason}" if reason else "")
    reason = _first_line(str(exc))
    return f"the connection to {url} failed" + (f": {reason}" if reason else "")


LIST_TIMEOUT = 10.0
"""Seconds to wait for a provider's model list."""


def list_models(
    router: ProviderRouter, provider_id: str, *, timeout: float = LIST_TIMEOUT
) -> list[str]:
    """The model ids a provider's server lists at its `/models` endpoint (both wire APIs
    answer `{"data": [{"id": ...}, ...]}`), sorted.

    Raises:
        NodmixError: the provider cannot be built, the server is unreachable, refuses the
            key, or answers something that is not a model list.
    """
    import httpx2

    provider = router.provider(provider_id)
    target = str(getattr(provider, "models_url", ""))
    if not target:
        raise NodmixError(f"{provider_id}: this provider has no model list")
    url = display_url(target)
    headers = dict(getattr(provider, "request_headers")())  # noqa: B009
    headers["accept"] = "application/json"
    try:
        response = httpx2.get(target, headers=headers, timeout=timeout)
    except httpx2.HTTPError as exc:
        raise NodmixError(unreachable(url, exc, timeout)) from None
    if response.status_code in (401, 403):
        raise NodmixError(f"{url} rejected the API key ({response.status_code})")
    if response.status_code >= 400:
        raise NodmixError(f"{url} answered {response.status_code}")
    try:
        data = response.json().get("data")
        ids = sorted({str(item["id"]) for item in data})
    except (ValueError, AttributeError, KeyError, TypeError):
        raise NodmixError(f"{url} did not answer with a model list") from None
    return ids
