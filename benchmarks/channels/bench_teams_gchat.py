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

import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.channels import harness
from benchmarks.report import cpu_calibration_ms
from nodmix.testing.googlechat_payloads import ChatUser
from nodmix.testing.googlechat_server import ScriptedChat
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.msteams_payloads import TeamsUser
from nodmix.testing.msteams_server import ScriptedTeams

SENDERS_AT_ONCE = 8
LIBRARIES = {
    "Teams": "import microsoft_agents.hosting.core.connector.client, "
    "microsoft_agents.activity, jwt",
    "Google Chat": "import google.auth.jwt, google.oauth2.service_account, "
    "google.auth.transport.requests",
}
GATEWAY_MODULES = "import nodmix.gateway.app, nodmix.runtime.core, nodmix.channels.manager, httpx2"
"""Imported before the library is measured: what a gateway holds already (pydantic, anyio,
starlette, the core's HTTP client) is not counted as the library's."""


def latency_and_burst() -> dict[str, harness.RunResult]:
    arrivals = harness.Arrivals()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(arrivals.respond) as model,
        ScriptedTeams() as teams,
        ScriptedChat() as chat,
    ):
        channels = {
            "msteams": teams.channel_config(**harness.OPEN),
            "googlechat": chat.channel_config(**harness.OPEN),
        }
        with harness.gateway_with(Path(tmp), model.base_url, channels) as gw:
            harness.wait_connected(gw, list(channels))
            teams.endpoint = gw.url + "/channels/msteams/messages"
            chat.endpoint = gw.url + "/channels/googlechat/events"

            def to_teams(sender: str, text: str) -> Callable[[], int]:
                activity, token = teams.activity(text, user=TeamsUser(sender)), teams.sign()
                return lambda: teams.post(activity, token=token)

            def to_chat(sender: str, text: str) -> Callable[[], int]:
                event, token = chat.event(text, user=ChatUser(sender)), chat.sign()
                return lambda: chat.post(event, token=token)

            at_once = SENDERS_AT_ONCE
            return {
                "Teams": harness.run_channel(
                    "teams", to_teams, teams.texts, arrivals, senders=at_once
                ),
                "Google Chat": harness.run_channel(
                    "chat", to_chat, chat.texts, arrivals, senders=at_once
                ),
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
    with harness.idle_gateways() as measure, ScriptedTeams() as teams, ScriptedChat() as chat:
        base = measure({})
        with_teams = measure({"msteams": teams.channel_config()})
        with_chat = measure({"googlechat": chat.channel_config()})
    return {
        "none": base,
        "Teams": (with_teams - base, library_mb(LIBRARIES["Teams"])),
        "Google Chat": (with_chat - base, library_mb(LIBRARIES["Google Chat"])),
    }


def main() -> None:
    names = ("Teams", "Google Chat")
    calibration = cpu_calibration_ms()
    harness.print_runs(latency_and_burst(), inbound="request", burst=f"({SENDERS_AT_ONCE} at once)")
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
