"""Gateway memory per idle channel.

    python -m benchmarks.channels.bench_memory

Starts `nodmix gateway` as a subprocess four times: with no channel, with Telegram (the real
library long polling the scripted Bot API), with Matrix (matrix-nio syncing with a real
Synapse on 127.0.0.1, as in the tests) and with both. Each gateway runs until its channels
are connected and have polled for a while with nothing to do; its resident memory (VmRSS) is
then sampled for a few seconds and the median kept. A channel's cost is its gateway's memory
minus the gateway without channels: the library it imports, its HTTP client and connection,
its delivery state and the channel layer's tasks.

Most of that is importing the platform's library, paid once per platform however many chats
or accounts it serves. The second table measures what each further idle channel costs once
the library is loaded: in one process, one adapter of a kind is started and left idle, then
ten more (ten Matrix accounts on the same Synapse, ten bots polling a scripted Bot API in a
separate process), and the growth in resident memory is divided by ten.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from tests.channels.synapse import Synapse
from tests.gateway.support import GatewayProcess

from nodmix.channels.matrix.adapter import MatrixAdapter
from nodmix.channels.matrix.credentials import MatrixSettings
from nodmix.channels.status import ChannelStatus
from nodmix.channels.telegram.adapter import TelegramAdapter, TelegramSettings
from nodmix.channels.types import InboundMessage
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.telegram_server import ScriptedBotAPI

TARGET_MB = 5.0
IDLE_SECONDS = 4.0
SAMPLES = 8
CONNECT_DEADLINE_S = 60.0


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS in /proc (Linux only)")


def _connected(state: Path, channels: list[str]) -> bool:
    path = state / "channels" / "status.json"
    if not channels:
        return True
    if not path.exists():
        return False
    rows = json.loads(path.read_text(encoding="utf-8")).get("channels", [])
    up = {r["channel"] for r in rows if r.get("connected")}
    return set(channels) <= up


def measure(root: Path, model_url: str, sections: dict[str, Any]) -> float:
    """Median VmRSS (MB) of an idle gateway with these channel sections."""
    state = Path(tempfile.mkdtemp(dir=root))
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": model_url,
                    "apiKey": "none",
                    "models": [{"id": "scripted", "contextWindow": 32000}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        "channels": sections,
    }
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")
    with GatewayProcess(state) as gateway:
        assert gateway.proc is not None
        pid = gateway.proc.pid
        deadline = time.monotonic() + CONNECT_DEADLINE_S
        while not _connected(state, list(sections)):
            if time.monotonic() > deadline:
                raise SystemExit(f"channels {list(sections)} did not connect")
            time.sleep(0.1)
        time.sleep(IDLE_SECONDS)  # a benchmark, not a test: let the polls settle
        samples = []
        for _ in range(SAMPLES):
            samples.append(_rss_kb(pid) / 1024)
            time.sleep(0.25)
    return statistics.median(samples)


EXTRA_CHANNELS = 10


async def _ignore(msg: InboundMessage) -> None:
    return None


async def _idle_rss_mb(adapters: list[Any], statuses: list[ChannelStatus]) -> float:
    """Run the adapters until all are connected and idle; the median VmRSS meanwhile (MB)."""
    pid = __import__("os").getpid()
    async with anyio.create_task_group() as group:
        for adapter, status in zip(adapters, statuses, strict=True):
            group.start_soon(adapter.run, _ignore, status)
        with anyio.fail_after(CONNECT_DEADLINE_S):
            while not all(s.connected for s in statuses):
                await anyio.sleep(0.1)
        await anyio.sleep(IDLE_SECONDS)
        samples = []
        for _ in range(SAMPLES):
            samples.append(_rss_kb(pid) / 1024)
            await anyio.sleep(0.25)
        group.cancel_scope.cancel()
    return statistics.median(samples)


async def marginal(make: Any, count: int) -> float:
    """MB per further idle adapter, after one of the kind ran (library loaded, warmed up)."""
    first = [make(0)]
    first_status = [ChannelStatus(channel="bench")]
    await _idle_rss_mb(first, first_status)
    before = await _idle_rss_mb(first, first_status)
    more = first + [make(i + 1) for i in range(count)]
    after = await _idle_rss_mb(more, [ChannelStatus(channel="bench") for _ in more])
    for adapter in more:
        await adapter.aclose()
    return (after - before) / count


def per_adapter(root: Path, synapse: Synapse) -> dict[str, float]:
    """Marginal memory of one more idle Telegram bot and one more idle Matrix account."""
    import subprocess

    server = subprocess.Popen(
        [sys.executable, "-m", "nodmix.testing.telegram_server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        api_url = server.stdout.readline().split()[3]  # "Bot API on http://... (token ...)"
        users = [synapse.register(f"idle{i}") for i in range(EXTRA_CHANNELS + 1)]

        def telegram(i: int) -> TelegramAdapter:
            settings = TelegramSettings("123456:TEST-token", api_url, 25, channel=f"tg{i}")
            return TelegramAdapter(settings, root / f"tg{i}")

        def matrix(i: int) -> MatrixAdapter:
            user = users[i]
            settings = MatrixSettings(
                synapse.url, user.user_id, access_token=user.token, channel=f"mx{i}"
            )
            return MatrixAdapter(settings, root / f"mx{i}")

        return {
            "telegram": anyio.run(marginal, telegram, EXTRA_CHANNELS),
            "matrix": anyio.run(marginal, matrix, EXTRA_CHANNELS),
        }
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(echo) as model,
        ScriptedBotAPI(max_poll_seconds=2) as api,
    ):
        root = Path(tmp)
        (root / "synapse").mkdir()
        synapse = Synapse(root / "synapse")
        synapse.start()
        try:
            bot = synapse.register("membench")
            telegram = {"botToken": api.token, "apiBaseUrl": api.url, "pollTimeoutSeconds": 2}
            matrix = {"homeserver": synapse.url, "userId": bot.user_id, "accessToken": bot.token}
            runs = {
                "none": measure(root, model.base_url, {}),
                "telegram": measure(root, model.base_url, {"telegram": telegram}),
                "matrix": measure(root, model.base_url, {"matrix": matrix}),
                "both": measure(root, model.base_url, {"telegram": telegram, "matrix": matrix}),
            }
            extra = per_adapter(root, synapse)
        finally:
            synapse.stop()
    base = runs["none"]
    rows = [
        ("gateway without channels", f"{base:.1f} MB"),
        ("+ Telegram, idle", f"{runs['telegram'] - base:+.1f} MB"),
        ("+ Matrix, idle", f"{runs['matrix'] - base:+.1f} MB"),
        ("+ both, idle (per channel)", f"{(runs['both'] - base) / 2:+.1f} MB"),
    ]
    print("| measurement | VmRSS (median of 8 samples) |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print(f"\n| one more idle channel, library loaded (of {EXTRA_CHANNELS}) | VmRSS |")
    print("|---|---|")
    for name, value in extra.items():
        print(f"| {name} | {value:+.2f} MB |")
    worst = max(extra.values())
    verdict = "meets" if worst <= TARGET_MB else "MISSES"
    print(
        f"\nper further idle channel at most {worst:.2f} MB: "
        f"{verdict} the {TARGET_MB:.0f} MB target"
    )
    if worst > TARGET_MB:
        sys.exit(1)


if __name__ == "__main__":
    main()
