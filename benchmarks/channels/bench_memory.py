"""Gateway memory per idle channel.

    python -m benchmarks.channels.bench_memory [--platforms telegram,matrix] [--rounds 3]

Each measurement is a fresh process running a real gateway (`BackgroundGateway`: uvicorn, the
runtime, a scripted model) with no channel configured, plus N idle channels of one platform
built by the channel registry as the gateway's channel manager builds them (sharing one TLS
context, as the manager's channels do) and run until connected; N is 0, 1, 2, 5 and 10. A
further process only imports the platform's adapter (its library, no channel), which
separates the library's fixed cost from what a channel costs. `nodmix.json` has one section
per platform, so a gateway runs one channel of each today; N > 1 shows what further accounts
would cost. The channels talk to local servers: the scripted Bot API (Telegram), a real
Synapse (Matrix, one account per channel), the scripted Discord and Slack servers (one bot
token, several sessions of it), ngircd (IRC, one nick per channel), dovecot (email, IMAP
IDLE on one mailbox), Prosody (XMPP, one account per channel) and the scripted Mattermost
server (one bot token, one WebSocket per channel).

Every process waits until its channels are connected, leaves them idle, samples its resident
memory (VmRSS, what `top` shows) and its anonymous memory (heap and other private pages; the
rest of RSS are file pages of shared libraries, which the kernel can drop and read again)
several times and keeps the medians; then it runs `gc.collect()` and `malloc_trim(0)` and
samples again, to show what such a trim would return. Rounds run every process in turn; the
table shows the median over rounds.

A cross-check runs `nodmix gateway` itself (a subprocess) with no channel and with one
channel of each platform, as a user would.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from tests.channels.irc_daemon import Ngircd
from tests.channels.mail_daemons import PASSWORD, USER, Dovecot, SmtpRecorder
from tests.channels.synapse import Synapse
from tests.gateway.support import GatewayProcess
from tests.support.config import scripted_config, write_json_config
from tests.support.process import rss_kb

from benchmarks.channels.xmpp_mm_servers import idle_sections
from benchmarks.report import cpu_calibration_ms
from nodmix.testing.discord_server import ScriptedDiscord
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.slack_server import ScriptedSlack
from nodmix.testing.telegram_server import ScriptedBotAPI

TARGET_MB = 5.0
IDLE_SECONDS = 3.0
SAMPLES = 8
CONNECT_DEADLINE_S = 60.0
WORKER_DEADLINE_S = 180.0
COUNTS = (0, 1, 2, 5, 10)
PLATFORMS = ("telegram", "matrix", "discord", "slack", "irc", "email", "xmpp", "mattermost")
IMPORT_ONLY = -1
"""The count that means: import the platform's adapter, start no channel."""
Results = dict[tuple[str, int], list[dict[str, float]]]
"""(platform, count) -> one measurement per round."""


# ---- the measured process ---------------------------------------------------------------


def _memory_mb() -> tuple[float, float]:
    """(VmRSS, anonymous) of this process, in MB, from /proc/self/smaps_rollup."""
    values: dict[str, int] = {}
    for line in Path("/proc/self/smaps_rollup").read_text(encoding="utf-8").splitlines()[1:]:
        key, _, rest = line.partition(":")
        values[key] = int(rest.split()[0])
    return values["Rss"] / 1024, values["Anonymous"] / 1024


async def _sample() -> tuple[float, float]:
    rss, anon = [], []
    for _ in range(SAMPLES):
        r, a = _memory_mb()
        rss.append(r)
        anon.append(a)
        await anyio.sleep(0.25)
    return statistics.median(rss), statistics.median(anon)


async def _run_channels(spec: dict[str, Any]) -> dict[str, float]:
    from nodmix.channels.registry import create_adapter
    from nodmix.channels.status import ChannelStatus
    from nodmix.channels.tls import ClientTls
    from nodmix.channels.types import InboundMessage
    from nodmix.config.loader import validate

    platform, count, root = spec["platform"], spec["count"], Path(spec["root"])
    if count == IMPORT_ONLY:
        importlib.import_module(f"nodmix.channels.{platform}.adapter")
    tls = ClientTls()  # one per gateway, as the channel manager holds it
    adapters = []
    for i in range(max(count, 0)):
        section = {platform: spec["sections"][i]}
        config = validate(scripted_config(spec["model_url"], channels=section), file="bench")
        state = root / f"channel{i}"
        state.mkdir()
        adapters.append(create_adapter(platform, config, {}, state, tls=tls))

    async def ignore(msg: InboundMessage) -> None:
        return None

    statuses = [ChannelStatus(channel=platform) for _ in adapters]
    async with anyio.create_task_group() as group:
        for adapter, status in zip(adapters, statuses, strict=True):
            group.start_soon(adapter.run, ignore, status)
        with anyio.fail_after(CONNECT_DEADLINE_S):
            while not all(s.connected for s in statuses):
                await anyio.sleep(0.05)
        await anyio.sleep(IDLE_SECONDS)  # a benchmark, not a test: let the polls settle
        rss, anon = await _sample()
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        await anyio.sleep(1.0)
        rss_trimmed, _ = await _sample()
        group.cancel_scope.cancel()
    for adapter in adapters:
        await adapter.aclose()
    return {"rss": rss, "anon": anon, "rss_trimmed": rss_trimmed}


def worker(spec: dict[str, Any]) -> None:
    """One measured process: a gateway without channels, then the spec's channels."""
    from nodmix.config.loader import load_config
    from nodmix.gateway import BackgroundGateway, GatewaySettings

    root = Path(spec["root"])
    path = write_json_config(root, spec["model_url"])
    with BackgroundGateway(GatewaySettings(port=0, token=None), loaded=load_config(path)):
        result = anyio.run(_run_channels, spec)
    print(json.dumps(result), flush=True)


# ---- the driver -------------------------------------------------------------------------


def run_worker(spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, float]:
    """Run one measured process; its result."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.channels.bench_memory", "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=WORKER_DEADLINE_S,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"worker {spec['platform']} x{spec['count']} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(root: Path, model_url: str, sections: dict[str, Any]) -> float:
    """Median VmRSS (MB) of an idle `nodmix gateway` subprocess with these channel sections."""
    state = Path(tempfile.mkdtemp(dir=root))
    write_json_config(state, model_url, channels=sections)
    with GatewayProcess(state) as gateway:
        assert gateway.proc is not None
        pid = gateway.proc.pid
        status = state / "channels" / "status.json"
        deadline = time.monotonic() + CONNECT_DEADLINE_S
        while sections:
            rows = json.loads(status.read_text(encoding="utf-8")) if status.exists() else {}
            up = {r["channel"] for r in rows.get("channels", []) if r.get("connected")}
            if set(sections) <= up:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"channels {list(sections)} did not connect")
            time.sleep(0.1)
        time.sleep(IDLE_SECONDS)
        samples = []
        for _ in range(SAMPLES):
            samples.append(rss_kb(pid) / 1024)
            time.sleep(0.25)
    return statistics.median(samples)


class Servers:
    """The platforms' local servers and one config section per channel."""

    def __init__(self, root: Path, platforms: list[str]) -> None:
        self.root = root
        self.platforms = platforms
        self.sections: dict[str, list[dict[str, Any]]] = {}
        self._synapse: Synapse | None = None
        self._stack: list[Any] = []
        self._stoppers: list[Callable[[], None]] = []

    def __enter__(self) -> Servers:
        count = max(COUNTS)
        if "telegram" in self.platforms:
            api = self._enter(ScriptedBotAPI(max_poll_seconds=2))
            section = {"botToken": api.token, "apiBaseUrl": api.url, "pollTimeoutSeconds": 2}
            self.sections["telegram"] = [section] * count
        if "discord" in self.platforms:
            discord = self._enter(ScriptedDiscord())
            section = {"token": discord.token, "apiBaseUrl": discord.api_url}
            self.sections["discord"] = [{**section, "slashCommands": False}] * count
        if "slack" in self.platforms:
            slack = self._enter(ScriptedSlack())
            section = {
                "botToken": slack.bot_token,
                "appToken": slack.app_token,
                "apiBaseUrl": slack.api_url,
            }
            self.sections["slack"] = [section] * count
        if "irc" in self.platforms:
            (self.root / "ircd").mkdir()
            ircd = Ngircd(self.root / "ircd")
            ircd.start()
            self._stoppers.append(ircd.stop)
            base = {"host": "127.0.0.1", "port": ircd.port, "tls": False, "channels": ["#idle"]}
            self.sections["irc"] = [{**base, "nick": f"idlebot{i}"} for i in range(count)]
        if "email" in self.platforms:
            dovecot = Dovecot()
            self._stoppers.append(dovecot.close)
            dovecot.start()
            smtp = self._enter(SmtpRecorder())
            imap = {"host": "127.0.0.1", "port": dovecot.port, "tls": False, "password": PASSWORD}
            outbox = {"host": "127.0.0.1", "port": smtp.port, "security": "none", "username": ""}
            section = {"address": USER, "imap": imap, "smtp": outbox}
            self.sections["email"] = [section] * count
        self.sections |= idle_sections(
            self.platforms, self.root, count, self._enter, self._stoppers
        )
        if "matrix" in self.platforms:
            (self.root / "synapse").mkdir()
            self._synapse = Synapse(self.root / "synapse")
            self._synapse.start()
            users = [self._synapse.register(f"idle{i}") for i in range(count)]
            self.sections["matrix"] = [
                {"homeserver": self._synapse.url, "userId": u.user_id, "accessToken": u.token}
                for u in users
            ]
        return self

    def _enter(self, server: Any) -> Any:
        self._stack.append(server)
        return server.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._synapse is not None:
            self._synapse.stop()
        for stop in reversed(self._stoppers):
            stop()
        for server in reversed(self._stack):
            server.__exit__(None, None, None)


def collect(
    servers: Servers, model_url: str, rounds: int, env: dict[str, str] | None = None
) -> Results:
    """Every (platform, count) measured once per round, in turn; the samples."""
    plan = [("none", 0)] + [
        (p, n) for p in servers.platforms for n in (IMPORT_ONLY, *COUNTS) if n != 0
    ]
    results: Results = {key: [] for key in plan}
    for _ in range(rounds):
        for platform, count in plan:
            root = Path(tempfile.mkdtemp(dir=servers.root))
            spec = {
                "platform": platform,
                "count": count,
                "root": str(root),
                "model_url": model_url,
                "sections": servers.sections.get(platform, []),
            }
            results[(platform, count)].append(run_worker(spec, env))
    return results


def _median(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(s[key] for s in samples)


@dataclass(frozen=True, slots=True)
class Costs:
    """What one platform costs above a gateway without channels (MB, medians over rounds)."""

    library: float
    """Its adapter imported, no channel started."""
    channels: dict[int, tuple[float, float]]
    """N idle channels -> (VmRSS, anonymous) above the gateway without channels."""
    trimmed: float
    """VmRSS that `gc.collect()` + `malloc_trim(0)` returned with the most channels."""

    @property
    def first(self) -> float:
        return self.channels[1][0]

    @property
    def further(self) -> float:
        most = max(self.channels)
        return (self.channels[most][0] - self.channels[1][0]) / (most - 1)

    @property
    def average(self) -> float:
        most = max(self.channels)
        return self.channels[most][0] / most


def costs(results: Results, platform: str) -> Costs:
    """One platform's costs from the samples."""
    base = results[("none", 0)]
    base_rss, base_anon = _median(base, "rss"), _median(base, "anon")
    channels = {
        n: (
            _median(results[(platform, n)], "rss") - base_rss,
            _median(results[(platform, n)], "anon") - base_anon,
        )
        for n in COUNTS[1:]
    }
    most = results[(platform, max(COUNTS))]
    return Costs(
        library=_median(results[(platform, IMPORT_ONLY)], "rss") - base_rss,
        channels=channels,
        trimmed=_median(most, "rss") - _median(most, "rss_trimmed"),
    )


def report(results: Results, platforms: list[str]) -> dict[str, Costs]:
    """Print the table of every platform; their costs."""
    base = results[("none", 0)]
    most = max(COUNTS)
    counts = " | ".join(f"{n} idle" for n in COUNTS[1:])
    print(
        f"| VmRSS above the gateway without channels (anonymous) | library loaded, no channel | "
        f"{counts} | average per channel at {most} | each further channel | "
        f"returned by gc + malloc_trim at {most} |"
    )
    print("|---|---:|" + "---:|" * (len(COUNTS) - 1) + "---:|---:|---:|")
    rss, anon = _median(base, "rss"), _median(base, "anon")
    trimmed = rss - _median(base, "rss_trimmed")
    blank = " |" * (len(COUNTS) + 1)
    print(f"| gateway without channels | {rss:.1f} MB ({anon:.1f} MB) |{blank} {trimmed:.1f} MB |")
    out = {}
    for p in platforms:
        c = out[p] = costs(results, p)
        cells = " | ".join(f"{r:+.1f} ({a:+.1f})" for r, a in c.channels.values())
        print(
            f"| {p} | {c.library:+.1f} | {cells} | {c.average:+.2f} MB | {c.further:+.2f} MB | "
            f"{c.trimmed:.1f} MB |"
        )
    return out


def verdict(found: dict[str, Costs]) -> bool:
    """Print the target under both readings; whether each further channel meets it."""
    readings = [
        ("the first channel of a platform (its library included)", lambda c: c.first),
        (f"average per channel with {max(COUNTS)} of a platform", lambda c: c.average),
        ("each further channel of a platform already loaded", lambda c: c.further),
    ]
    print(f"\n| target: ≤ {TARGET_MB:.0f} MB per idle channel, read as | worst | met |")
    print("|---|---|---|")
    ok = False
    for reading, value in readings:
        worst = max(found, key=lambda p: value(found[p]))
        ok = value(found[worst]) <= TARGET_MB
        print(f"| {reading} | {worst} {value(found[worst]):+.2f} MB | {'yes' if ok else 'no'} |")
    return ok  # the last reading: the one the channel layer can act on


def cross_check(servers: Servers, model_url: str) -> None:
    """`nodmix gateway` itself: no channel, then each platform's one configured channel."""
    none = measure(servers.root, model_url, {})
    cells = [
        f"{measure(servers.root, model_url, {p: servers.sections[p][0]}) - none:+.1f} MB"
        for p in servers.platforms
    ]
    print(f"\n| `nodmix gateway` VmRSS | no channel | {' | '.join(servers.platforms)} |")
    print("|---|---:|" + "---:|" * len(servers.platforms))
    print(f"| idle, one channel configured | {none:.1f} MB | {' | '.join(cells)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    platforms = [p for p in args.platforms.split(",") if p]
    calibration = cpu_calibration_ms()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(echo) as model,
        Servers(Path(tmp), platforms) as servers,
    ):
        results = collect(servers, model.base_url, args.rounds)
        found = report(results, platforms)
        met = verdict(found)
        cross_check(servers, model.base_url)
    print("\n| CPU calibration | rounds | samples per process |\n|---:|---:|---:|")
    print(f"| {calibration:.0f} ms | {args.rounds} | {SAMPLES} |")
    if not met:
        sys.exit(1)


if __name__ == "__main__":
    main()
