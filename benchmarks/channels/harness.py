"""What the channel latency benchmarks share: the scripted model that notes when each text
arrives, a real gateway (in process, on a socket) over a fresh state folder, the latency and
burst runs of one channel, their table cells, and idle gateway subprocesses for memory.

Latency runs from just before a message is injected into (or posted by) the platform's
server to the model request arriving: one process, one clock. The burst sends
`BURST_MESSAGES` DMs from `BURST_SENDERS` senders and counts the replies lost or doubled.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from tests.support.config import write_json_config

from benchmarks.channels.bench_memory import measure
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo

LATENCY_MESSAGES = 40
BURST_MESSAGES = 200
BURST_SENDERS = 50
OPEN = {"allowFrom": ["*"], "dmPolicy": "open", "typing": False}
"""A channel section's access part: anyone may write, no typing indicators."""
DEADLINE_SECONDS = 120.0

RunResult = tuple[list[float], float, int, int]
"""Latency samples (ms), burst seconds, lost and doubled replies."""
Prepare = Callable[[str, str], Callable[[], int | None]]
"""(sender, text) -> the message ready to send (signed already, where the platform signs);
sending it returns the HTTP status the gateway answered, or None where nothing answers."""


class Arrivals:
    """The scripted model's answers (`re: <text>`) and when each text first reached it."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._lock = threading.Lock()

    def respond(self, request: ModelRequest) -> ModelReply:
        users = [m for m in request.messages if isinstance(m, UserMessage)]
        text = users[-1].text if users else ""
        with self._lock:
            self.times.setdefault(text, time.perf_counter())
        return ModelReply.text(f"re: {text}")

    def __getitem__(self, text: str) -> float:
        return self.times[text]


@contextmanager
def idle_gateways() -> Iterator[Callable[[dict[str, Any]], float]]:
    """`measure(channels)`: the median VmRSS (MB) of an idle `nodmix gateway` subprocess with
    these channel sections (`bench_memory.measure`), its model the scripted echo server."""
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(echo) as model:
        yield lambda channels: measure(Path(tmp), model.base_url, channels)


def wait_until(
    check: Callable[[], object], what: str, deadline_s: float = DEADLINE_SECONDS
) -> None:
    """Poll `check()` until it is truthy (the benchmark stops when `deadline_s` pass)."""
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.002)


def background_gateway() -> BackgroundGateway:
    """The gateway on a free port, without a token, trying the model once."""
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


@contextmanager
def gateway_with(
    state: Path, model_url: str, channels: dict[str, Any]
) -> Iterator[BackgroundGateway]:
    """A running gateway over `state` whose model is at `model_url`, with `channels` (a DM
    session per sender)."""
    os.environ["NODMIX_STATE_DIR"] = str(state)
    os.environ["NODMIX_CONFIG_PATH"] = str(state / "nodmix.json")
    write_json_config(state, model_url, channels=channels, session={"dmScope": "per-peer"})
    with background_gateway() as gateway:
        yield gateway


def wait_connected(
    gateway: BackgroundGateway, channels: list[str], deadline_s: float = 60.0
) -> None:
    """Until every one of `channels` shows connected."""
    statuses = gateway.runtime.channels.statuses
    wait_until(
        lambda: all(n in statuses and statuses[n].connected for n in channels),
        f"{', '.join(channels)} connected",
        deadline_s,
    )


def injection(inject: Callable[[str, str], object]) -> Prepare:
    """`Prepare` for a server whose injection is the send: (sender, text) -> inject them."""

    def prepare(sender: str, text: str) -> Callable[[], None]:
        def send() -> None:
            inject(sender, text)

        return send

    return prepare


def run_channel(
    name: str,
    prepare: Prepare,
    replies: Callable[[], list[str]],
    arrivals: Arrivals,
    *,
    senders: int = 1,
) -> RunResult:
    """`LATENCY_MESSAGES` messages one at a time, then the burst (`senders` threads sending
    at once)."""

    def send(message: Callable[[], int | None]) -> None:
        status = message()
        if status not in (None, 200):
            raise SystemExit(f"{name}: refused ({status})")

    latencies = []
    for i in range(LATENCY_MESSAGES):
        text = f"{name} latency {i}"
        message = prepare("7", text)
        sent = time.perf_counter()
        send(message)
        wait_until(partial(contains, replies, f"re: {text}"), f"{name} reply")
        latencies.append((arrivals[text] - sent) * 1000)
    burst = [
        prepare(str(1000 + i % BURST_SENDERS), f"{name} burst {i}") for i in range(BURST_MESSAGES)
    ]
    start = time.perf_counter()
    with ThreadPoolExecutor(senders) as pool:
        statuses = [sent.result() for sent in [pool.submit(message) for message in burst]]
    if not set(statuses) <= {None, 200}:
        raise SystemExit(f"{name}: burst statuses {Counter(statuses)}")
    mine = f"re: {name} burst"
    wait_until(lambda: sum(t.startswith(mine) for t in replies()) >= BURST_MESSAGES, name)
    seconds = time.perf_counter() - start
    counted = Counter(t for t in replies() if t.startswith(mine))
    return latencies, seconds, BURST_MESSAGES - len(counted), sum(n > 1 for n in counted.values())


def contains(texts: Callable[[], list[str]], text: str) -> bool:
    """`text` is among `texts()`."""
    return text in texts()


def latency_cell(samples: list[float]) -> str:
    """`median ms (p90 ms)`."""
    ordered = sorted(samples)
    p90 = ordered[int(len(ordered) * 0.9)]
    return f"{statistics.median(ordered):.1f} ms (p90 {p90:.1f} ms)"


def print_runs(results: dict[str, RunResult], *, inbound: str, burst: str = "at once") -> None:
    """The table's head and its latency and burst rows, a column per channel."""
    print(f"| measurement | {' | '.join(results)} |")
    print("|---" * (len(results) + 1) + "|")
    cells = [latency_cell(r[0]) for r in results.values()]
    print(
        f"| inbound {inbound} → model request, median of {LATENCY_MESSAGES} | {' | '.join(cells)} |"
    )
    cells = [f"all answered in {r[1]:.1f} s; lost {r[2]}, twice {r[3]}" for r in results.values()]
    print(f"| {BURST_MESSAGES} DMs from {BURST_SENDERS} senders {burst} | {' | '.join(cells)} |")
