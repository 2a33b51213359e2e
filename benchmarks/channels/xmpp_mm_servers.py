"""The XMPP and Mattermost servers of the channel memory benchmark (`bench_memory`): a real
Prosody on loopback with one account per channel, and the scripted Mattermost server (one bot
token, one WebSocket per channel)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.channels.prosody import Prosody

from nodmix.testing.mattermost_server import ScriptedMattermost


def idle_sections(
    platforms: list[str],
    root: Path,
    count: int,
    enter: Callable[[Any], Any],
    stoppers: list[Callable[[], None]],
) -> dict[str, list[dict[str, Any]]]:
    """`count` config sections per platform among `xmpp` and `mattermost` in `platforms`,
    their servers started (`enter` for context managers, `stoppers` for the rest)."""
    sections: dict[str, list[dict[str, Any]]] = {}
    if "xmpp" in platforms:
        prosody = Prosody(root / "prosody")
        jids = [prosody.register(f"idle{i}", "pw") for i in range(count)]
        prosody.start()
        stoppers.append(prosody.stop)
        base = {"password": "pw", "server": "127.0.0.1", "port": prosody.port, "tls": "off"}
        sections["xmpp"] = [{**base, "jid": jid} for jid in jids]
    if "mattermost" in platforms:
        mm = enter(ScriptedMattermost())
        sections["mattermost"] = [{"url": mm.url, "token": mm.token}] * count
    return sections
