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

import tempfile
from pathlib import Path

from benchmarks.channels import harness
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.slack_server import ScriptedSlack


def latency_and_burst() -> dict[str, harness.RunResult]:
    arrivals = harness.Arrivals()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(arrivals.respond) as model,
        ScriptedDiscord() as discord,
        ScriptedSlack() as slack,
    ):
        channels = {
            "discord": {"token": discord.token, "apiBaseUrl": discord.api_url, **harness.OPEN},
            "slack": {
                "botToken": slack.bot_token,
                "appToken": slack.app_token,
                "apiBaseUrl": slack.api_url,
                **harness.OPEN,
            },
        }
        with harness.gateway_with(Path(tmp), model.base_url, channels):
            discord.wait_for(lambda: discord.sessions_ready, timeout=60)
            slack.wait_for(lambda: slack.connections, timeout=60)

            def to_discord(sender: str, text: str) -> None:
                discord.inject_dm(sender_id=sender, text=text)

            def to_slack(sender: str, text: str) -> None:
                slack.inject_message(channel=f"D{sender}", user=f"U{sender}", text=text)

            return {
                "Discord": harness.run_channel(
                    "discord", harness.injection(to_discord), discord.sent_texts, arrivals
                ),
                "Slack": harness.run_channel(
                    "slack", harness.injection(to_slack), slack.sent_texts, arrivals
                ),
            }


def memory() -> dict[str, float]:
    with harness.idle_gateways() as measure, ScriptedDiscord() as discord, ScriptedSlack() as slack:
        base = measure({})
        with_discord = measure({"discord": {"token": discord.token, "apiBaseUrl": discord.api_url}})
        tokens = {"botToken": slack.bot_token, "appToken": slack.app_token}
        with_slack = measure({"slack": {**tokens, "apiBaseUrl": slack.api_url}})
    return {"none": base, "Discord": with_discord - base, "Slack": with_slack - base}


def main() -> None:
    harness.print_runs(latency_and_burst(), inbound="event")
    mem = memory()
    print(f"| gateway VmRSS without channels | {mem['none']:.1f} MB | |")
    print(f"| + the channel, idle | {mem['Discord']:+.1f} MB | {mem['Slack']:+.1f} MB |")


if __name__ == "__main__":
    main()
