"""Shared fixtures for the sandbox tests. They drive the real QuickJS-WASI runtime (no mocks)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from nodmix.sandbox import Cell, HostCallError, QuickJSRuntime, SandboxLimits
from tests.assets.registry import serve_registry

#: A typical embedding: expose the capability through small frozen globals.
SETUP = """(cap) => {
  const parse = JSON.parse, stringify = JSON.stringify;
  Object.defineProperty(globalThis, 'host', {
    value: Object.freeze({
      call: (op, value) => {
        const reply = cap.call(op, stringify(value === undefined ? null : value));
        return reply === undefined ? undefined : parse(reply);
      },
      request: (op, value) => cap.request(op, value),
    }),
    enumerable: false, writable: false, configurable: false,
  });
}"""


@dataclass
class Recorder:
    """A HostHandler that records traffic and answers from small scripted tables.

    `calls`: op -> reply text (or an exception to raise). `ready`: op -> (ok, text) to settle
    requests inline; any other request stays pending.
    """

    calls: dict[str, str | Exception] = field(default_factory=dict)
    ready: dict[str, tuple[bool, str]] = field(default_factory=dict)
    seen_calls: list[tuple[str, str]] = field(default_factory=list)
    seen_requests: list[tuple[int, str, str]] = field(default_factory=list)

    def on_call(self, op: str, payload_json: str) -> str | None:
        self.seen_calls.append((op, payload_json))
        if op == "echo":
            return payload_json
        reply = self.calls.get(op)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def on_request(self, request_id: int, op: str, payload_json: str) -> tuple[bool, str] | None:
        self.seen_requests.append((request_id, op, payload_json))
        if op == "echo":
            return True, payload_json
        if op == "boom":
            raise HostCallError(f"{op} failed")
        return self.ready.get(op)

    def payload(self, request_id: int) -> object:
        """The decoded payload of a recorded request."""
        for rid, _, text in self.seen_requests:
            if rid == request_id:
                return json.loads(text)
        raise KeyError(request_id)


@pytest.fixture(scope="session")
def runtime() -> QuickJSRuntime:
    """The installed runtime; installs it (network) if this machine has not yet."""
    from nodmix.sandbox import assets, get_runtime

    if not assets.status().installed:
        assets.install()
    return get_runtime()


@pytest.fixture
def setup_script() -> str:
    """The standard setup script (globals `host.call` / `host.request`)."""
    return SETUP


@pytest.fixture
def recorder() -> Recorder:
    """A fresh recording handler."""
    return Recorder()


@pytest.fixture
def boot(runtime: QuickJSRuntime, recorder: Recorder) -> Callable[..., Cell]:
    """Boot a cell with the standard setup script and the shared recorder."""

    def make(*, setup: str | None = SETUP, handler: object = None, **limits: float) -> Cell:
        return Cell.boot(
            setup,
            handler or recorder,  # type: ignore[arg-type]
            limits=SandboxLimits(**limits),  # type: ignore[arg-type]
            runtime=runtime,
        )

    return make


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio."""
    return "asyncio"


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bytes]]:
    """A local HTTP registry serving whatever tarball the test puts in the dict."""
    with serve_registry() as (url, served):
        monkeypatch.setenv("NODMIX_NPM_REGISTRY", url)
        yield served
