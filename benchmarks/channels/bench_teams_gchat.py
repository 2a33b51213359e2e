"""Microsoft Teams and Google Chat channels: inbound latency to the model request, a burst of
DMs, and the memory an idle gateway pays for each, beyond its library.

    python -m benchmarks.channels.bench_teams_gchat

Latency and burst: a real gateway (in process, on a socket) serves both channels' endpoints;
the scripted Teams and Chat services post signed activities and events to it, as the
platforms do, and take the replies (the Agents SDK's Bot Connector client, the Chat REST API
with google-auth's token); the agent's model is the scripted model server. Latency runs from
just before a (pre-signed) request is posted to the model request arriving (one process, one
clock): the HTTP request, the token check against cached keys, the body's parsing, access
control, the fsync'ed pending file, the session lane and the turn's set-up. The burst posts
from 8 threads at once.

Memory: `nodmix gateway` subprocesses with no channel and with each channel, idle after it
got its token (`benchmarks.channels.bench_memory.measure`); and, in a fresh interpreter, what
importing the channel's library alone adds, so the channel's own cost is the difference.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.support.config import write_json_config

from benchmarks.channels.bench_memory import measure
from benchmarks.report import cpu_calibration_ms
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.googlechat_payloads import ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams
from nodmix.testing.scripts.echo import respond as echo

LATENCY_MESSAGES = 40
BURST_MESSAGES = 200
BURST_SENDERS = 50
OPEN = {"allowFrom": ["*"], "dmPolicy": "open", "typing": False}
LIBRARIES = {
    "Teams": "import microsoft_agents.hosting.core.connector.client, "
    "microsoft_agents.activity, jwt",
    "Google Chat": "import google.auth.jwt, google.oauth2.service_account, "
    "google.auth.transport.requests",
}
GATEWAY_MODULES = "import nodmix.gateway.app, nodmix.runtime.core, nodmix.channels.manager, httpx2"
"""Imported before the library is measured: what a gateway holds already (pydantic, anyio,
starlette, the core's HTTP client) is not counted as the library's."""

Post = Callable[[str, str], Callable[[], int]]
"""(sender, text) -> a prepared post (signed already), returning the HTTP status."""


def _run(
    name: str, prepare: Post, replies: Callable[[], list[str]], arrivals: dict[str, float]
) -> tuple[list[float], float, int, int]:
    """Latency samples (ms), burst seconds, lost and doubled replies of one channel."""

    def wait(check: Callable[[], bool]) -> None:
        end = time.monotonic() + 120
        while not check():
            if time.monotonic() > end:
                raise SystemExit(f"{name}: timed out")
            time.sleep(0.002)

    latencies = []
    for i in range(LATENCY_MESSAGES):
        text = f"{name} latency {i}"
        post = prepare("7", text)
        posted = time.perf_counter()
        if post() != 200:
            raise SystemExit(f"{name}: refused")
        wait(lambda t=text: f"re: {t}" in replies())
        latencies.append((arrivals[text] - posted) * 1000)
    posts = [prepare(str(1000 + i % BURST_SENDERS), f"{name} burst {i}") for i in range(200)]
    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda post: post(), posts))
    if set(statuses) != {200}:
        raise SystemExit(f"{name}: burst statuses {Counter(statuses)}")
    wait(lambda: sum(t.startswith(f"re: {name} burst") for t in replies()) >= BURST_MESSAGES)
    seconds = time.perf_counter() - start
    counted = Counter(t for t in replies() if t.startswith(f"re: {name} burst"))
    return latencies, seconds, BURST_MESSAGES - len(counted), sum(n > 1 for n in counted.values())


def latency_and_burst() -> dict[str, tuple[list[float], float, int, int]]:
    arrivals: dict[str, float] = {}
    lock = threading.Lock()

    def respond(request: ModelRequest) -> ModelReply:
        users = [m for m in request.messages if isinstance(m, UserMessage)]
        text = users[-1].text if users else ""
        with lock:
            arrivals.setdefault(text, time.perf_counter())
        return ModelReply.text(f"re: {text}")

    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(respond) as model,
        ScriptedTeams() as teams,
        ScriptedChat() as chat,
    ):
        state = Path(tmp)
        os.environ["NODMIX_STATE_DIR"] = str(state)
        os.environ["NODMIX_CONFIG_PATH"] = str(state / "nodmix.json")
        channels = {
            "msteams": teams.channel_config(**OPEN),
            "googlechat": chat.channel_config(**OPEN),
        }
        write_json_config(state, model.base_url, channels=channels, session={"dmScope": "per-peer"})
        with BackgroundGateway(
            GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1)
        ) as gw:
            statuses = gw.runtime.channels.statuses
            teams.wait_for(lambda: all(c in statuses and statuses[c].connected for c in channels))
            teams.endpoint = gw.url + "/channels/msteams/messages"
            chat.endpoint = gw.url + "/channels/googlechat/events"

            def to_teams(sender: str, text: str) -> Callable[[], int]:
                activity, token = teams.activity(text, user=TeamsUser(sender)), teams.sign()
                return lambda: teams.post(activity, token=token)

            def to_chat(sender: str, text: str) -> Callable[[], int]:
                event, token = chat.event(text, user=ChatUser(sender)), chat.sign()
                return lambda: chat.post(event, token=token)

            return {
                "Teams": _run("teams", to_teams, teams.texts, arrivals),
                "Google Chat": _run("chat", to_chat, chat.texts, arrivals),
            }


def library_mb(statement: str) -> float:
    """VmRSS an interpreter that holds the gateway's modules gains by running `statement`
    (median of 3)."""
    probe = (
        f"import re\n{GATEWAY_MODULES}\n"
        "def rss():\n"
        "    return int(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read())[1])\n"
        f"before = rss()\n{statement}\nprint((rss() - before) / 1024)\n"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", probe], capture_output=True, text=True, check=True
            ).stdout
        )  # fmt: skip
        for _ in range(3)
    ]
    return statistics.median(runs)


def memory() -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(echo) as model,
        ScriptedTeams() as teams,
        ScriptedChat() as chat,
    ):
        root = Path(tmp)
        base = measure(root, model.base_url, {})
        with_teams = measure(root, model.base_url, {"msteams": teams.channel_config()})
        with_chat = measure(root, model.base_url, {"googlechat": chat.channel_config()})
    return {
        "none": base,
        "Teams": (with_teams - base, library_mb(LIBRARIES["Teams"])),
        "Google Chat": (with_chat - base, library_mb(LIBRARIES["Google Chat"])),
    }


def main() -> None:
    names = ("Teams", "Google Chat")
    calibration = cpu_calibration_ms()
    results = latency_and_burst()
    print("| measurement | Teams | Google Chat |")
    print("|---|---|---|")
    cells = []
    for name in names:
        latencies = sorted(results[name][0])
        p90 = latencies[int(len(latencies) * 0.9)]
        cells.append(f"{statistics.median(latencies):.1f} ms (p90 {p90:.1f} ms)")
    print(
        f"| inbound request → model request, median of {LATENCY_MESSAGES} | {' | '.join(cells)} |"
    )
    cells = [
        f"all answered in {results[n][1]:.1f} s; lost {results[n][2]}, twice {results[n][3]}"
        for n in names
    ]
    print(
        f"| {BURST_MESSAGES} DMs from {BURST_SENDERS} senders (8 at once) | {' | '.join(cells)} |"
    )
    mem = memory()
    print(f"| gateway VmRSS without channels | {mem['none']:.1f} MB | |")
    print(f"| + the channel, idle | {mem['Teams'][0]:+.1f} MB | {mem['Google Chat'][0]:+.1f} MB |")
    libraries = f"{mem['Teams'][1]:.1f} MB | {mem['Google Chat'][1]:.1f} MB"
    print(f"| of which importing its library (beyond the gateway's own) | {libraries} |")
    own = [mem[n][0] - mem[n][1] for n in names]
    print(f"| the channel beyond its library | {own[0]:+.1f} MB | {own[1]:+.1f} MB |")
    print(f"| CPU calibration (before the run) | {calibration:.0f} ms | |")


if __name__ == "__main__":
    main()
