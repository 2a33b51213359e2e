"""Discord and Slack channels: inbound latency to the model request, a burst of DMs, and the
memory an idle gateway pays for each.

    python -m benchmarks.channels.bench_discord_slack

Latency and burst: a real gateway (in process, on a socket) runs discord.py against the
scripted Discord server (Gateway WebSocket + REST) and a Bolt app against the scripted Slack
server (Socket Mode WebSocket + Web API); the agent's model is the scripted model server.
Latency is measured from injecting an event into the scripted server to the model request
arriving (both in this process, one clock): the WebSocket frame, the library's parsing and
dispatch, access control, the fsync'ed pending file, the session lane and the turn's set-up.
Memory: `nodmix gateway` subprocesses with no channel, with Discord and with Slack, each left
idle after connecting (`benchmarks.channels.bench_memory.measure`).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.config import write_json_config

from benchmarks.channels.bench_memory import measure
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.slack_server import ScriptedSlack

LATENCY_MESSAGES = 40
BURST_MESSAGES = 200
BURST_SENDERS = 50
OPEN = {"allowFrom": ["*"], "dmPolicy": "open", "typing": False}


def _config(state: Path, model_url: str, channels: dict[str, Any]) -> None:
    write_json_config(state, model_url, channels=channels, session={"dmScope": "per-peer"})


def _run(
    name: str,
    inject: Callable[[str, str], None],
    replies: Callable[[], list[str]],
    arrivals: dict[str, float],
) -> tuple[list[float], float, int, int]:
    """Latency samples (ms), burst seconds, lost and doubled replies of one channel."""
    deadline_s = 120.0

    def wait(check: Callable[[], bool]) -> None:
        end = time.monotonic() + deadline_s
        while not check():
            if time.monotonic() > end:
                raise SystemExit(f"{name}: timed out")
            time.sleep(0.002)

    latencies = []
    for i in range(LATENCY_MESSAGES):
        text = f"{name} latency {i}"
        injected = time.perf_counter()
        inject("7", text)
        wait(lambda t=text: f"re: {t}" in replies())
        latencies.append((arrivals[text] - injected) * 1000)
    start = time.perf_counter()
    for i in range(BURST_MESSAGES):
        inject(str(1000 + i % BURST_SENDERS), f"{name} burst {i}")
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
        ScriptedDiscord() as discord,
        ScriptedSlack() as slack,
    ):
        state = Path(tmp)
        os.environ["NODMIX_STATE_DIR"] = str(state)
        os.environ["NODMIX_CONFIG_PATH"] = str(state / "nodmix.json")
        channels = {
            "discord": {"token": discord.token, "apiBaseUrl": discord.api_url, **OPEN},
            "slack": {
                "botToken": slack.bot_token,
                "appToken": slack.app_token,
                "apiBaseUrl": slack.api_url,
                **OPEN,
            },
        }
        _config(state, model.base_url, channels)
        settings = GatewaySettings(port=0, token=None)
        with BackgroundGateway(settings, retry=RetryPolicy(attempts=1)):
            discord.wait_for(lambda: discord.sessions_ready, timeout=60)
            slack.wait_for(lambda: slack.connections, timeout=60)

            def to_discord(sender: str, text: str) -> None:
                discord.inject_dm(sender_id=sender, text=text)

            def to_slack(sender: str, text: str) -> None:
                slack.inject_message(channel=f"D{sender}", user=f"U{sender}", text=text)

            return {
                "Discord": _run("discord", to_discord, discord.sent_texts, arrivals),
                "Slack": _run("slack", to_slack, slack.sent_texts, arrivals),
            }


def memory() -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(echo) as model,
        ScriptedDiscord() as discord,
        ScriptedSlack() as slack,
    ):
        root = Path(tmp)
        base = measure(root, model.base_url, {})
        section = {"token": discord.token, "apiBaseUrl": discord.api_url}
        with_discord = measure(root, model.base_url, {"discord": section})
        tokens = {"botToken": slack.bot_token, "appToken": slack.app_token}
        with_slack = measure(
            root, model.base_url, {"slack": {**tokens, "apiBaseUrl": slack.api_url}}
        )
    return {"none": base, "Discord": with_discord - base, "Slack": with_slack - base}


def main() -> None:
    results = latency_and_burst()
    print("| measurement | Discord | Slack |")
    print("|---|---|---|")
    cells = []
    for name in ("Discord", "Slack"):
        latencies = sorted(results[name][0])
        p90 = latencies[int(len(latencies) * 0.9)]
        cells.append(f"{statistics.median(latencies):.1f} ms (p90 {p90:.1f} ms)")
    print(f"| inbound event → model request, median of {LATENCY_MESSAGES} | {' | '.join(cells)} |")
    cells = [
        f"all answered in {results[n][1]:.1f} s; lost {results[n][2]}, twice {results[n][3]}"
        for n in ("Discord", "Slack")
    ]
    print(f"| {BURST_MESSAGES} DMs from {BURST_SENDERS} senders at once | {' | '.join(cells)} |")
    mem = memory()
    print(f"| gateway VmRSS without channels | {mem['none']:.1f} MB | |")
    print(f"| + the channel, idle | {mem['Discord']:+.1f} MB | {mem['Slack']:+.1f} MB |")


if __name__ == "__main__":
    main()
