"""What `nodmix channels status` and the web page show: per channel, connection state, last
event, errors and counts. The gateway keeps it in memory and mirrors it to
`<state>/channels/status.json` (at most about once a second) for other processes."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nodmix.channels.files import channels_dir, read_json, write_json


@dataclass(slots=True)
class ChannelStatus:
    """Live state of one channel."""

    channel: str
    connected: bool = False
    account: str | None = None
    """The bot's own name once connected (`@mybot`)."""
    last_event_at: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    received: int = 0
    answered: int = 0
    refused: int = 0
    ignored: int = 0
    pairing_requests: int = 0
    queued: int = 0
    errors: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    """Refused/ignored counts by reason."""

    def count(self, verdict: str, reason: str) -> None:
        """Count a message that did not reach the agent."""
        if verdict == "refuse":
            self.refused += 1
        elif verdict == "ignore":
            self.ignored += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def error(self, message: str) -> None:
        """Record a connection or delivery error."""
        self.errors += 1
        self.last_error = message
        self.last_error_at = time.time()

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON."""
        data = asdict(self)
        return {_camel(k): v for k, v in data.items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def status_path(state_dir: Path) -> Path:
    """Where the gateway mirrors channel status."""
    return channels_dir(state_dir) / "status.json"


def write_status(state_dir: Path, statuses: list[ChannelStatus]) -> None:
    """Mirror the live status (with this process's id, to tell a stale file)."""
    write_json(
        status_path(state_dir),
        {
            "pid": os.getpid(),
            "updatedAt": time.time(),
            "channels": [s.to_json() for s in statuses],
        },
    )


def read_status(state_dir: Path) -> tuple[bool, list[dict[str, Any]]]:
    """`(gateway_running, channel rows)` from the mirrored file."""
    data = read_json(status_path(state_dir), {})
    pid = data.get("pid")
    running = isinstance(pid, int) and _alive(pid)
    rows = data.get("channels", [])
    return running, [r for r in rows if isinstance(r, dict)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
