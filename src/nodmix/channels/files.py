"""Durable JSON state of the channel layer: atomic replace, and a lock file for the
read-modify-write cycles that the gateway and a `nodmix pairing` command may run at once."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nodmix.assets.files import atomic_write, ensure_private_dir

log = logging.getLogger("nodmix.channels")


def channels_dir(state_dir: Path) -> Path:
    """`<state>/channels`: pairing, offsets, pending deliveries, status."""
    return state_dir / "channels"


def read_json(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    """The JSON object in `path`; `default` when missing or unreadable (logged once)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return default
    return data if isinstance(data, dict) else default


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` atomically with `data` (survives a crash mid-write); folders are 0700."""
    ensure_private_dir(path.parent)
    atomic_write(path, json.dumps(data, indent=1, ensure_ascii=False).encode("utf-8"))


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `<path>.lock` (other processes wait)."""
    ensure_private_dir(path.parent)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
