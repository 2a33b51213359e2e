"""Where a running gateway can be found: `<state>/gateway.json`, written once it listens.

`nodmix gateway` records its pid, URL, version, instance id and token there (the file is 0600,
like the token file itself) and removes the file when it stops, so every command that talks to
the running gateway finds it on any port (port 0 included) with its token
(`nodmix.gateway.locate`). A record whose process is gone (the gateway was killed) is treated
as absent; callers then fall back to the configured port.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nodmix.assets.files import atomic_write


def presence_file(state_dir: Path) -> Path:
    """The record of the gateway serving this state dir."""
    return state_dir / "gateway.json"


@contextlib.contextmanager
def announce(
    state_dir: Path,
    *,
    url: str,
    version: str,
    instance: str | None = None,
    token: str | None = None,
) -> Iterator[Path]:
    """Record this process as the state dir's gateway while the block runs."""
    path = presence_file(state_dir)
    record: dict[str, Any] = {
        "pid": os.getpid(),
        "url": url,
        "version": version,
        "startedAt": int(time.time()),
        "instance": instance,
        "token": token,
    }
    atomic_write(path, (json.dumps(record) + "\n").encode())  # mkstemp: 0600 from the start
    path.chmod(0o600)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError, ValueError):
            if read_presence(state_dir, check_alive=False) == record:
                path.unlink()


def read_presence(state_dir: Path, *, check_alive: bool = True) -> dict[str, Any] | None:
    """The recorded gateway, or None if there is none (or, with `check_alive`, it is gone)."""
    try:
        record = json.loads(presence_file(state_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("url"), str):
        return None
    if check_alive and not _alive(record.get("pid")):
        return None
    return record


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
