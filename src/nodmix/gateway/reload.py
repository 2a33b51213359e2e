"""Noticing config file changes while the gateway runs.

The gateway does not apply a changed `nodmix.json` live. The running `Runtime` owns MCP
connections, provider clients and suspended code-mode runs built from the old config; swapping
it under running turns would drop suspended programs and restart MCP servers behind clients'
backs. Instead a background task polls the file (once a second) and, on a change:

- an invalid file is reported in one log line and ignored: the gateway keeps running on the
  config it started with;
- a valid file that differs is reported as "restart the gateway to apply", naming the changed
  top-level sections. `health` (WebSocket) exposes the same state, so the web page can say so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from nodmix.config.loader import LoadedConfig, load_config
from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.gateway")

_Signature = tuple[int, int, int] | None


def _signature(path: Path) -> _Signature:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def changed_sections(old: NodmixConfig, new: NodmixConfig) -> list[str]:
    """Top-level config sections whose values differ (in file order)."""
    return [name for name in old.__struct_fields__ if getattr(old, name) != getattr(new, name)]


@dataclass(slots=True, kw_only=True)
class ConfigState:
    """What the watcher knows about the file compared with the running config."""

    path: Path
    changed: list[str] = field(default_factory=list)
    """Sections that differ from the running config; a restart applies them."""
    error: str | None = None
    """Why the current file cannot be used, if it cannot."""

    @property
    def restart_required(self) -> bool:
        """Whether the file on disk holds a valid config the gateway is not running."""
        return bool(self.changed) and self.error is None

    def describe(self) -> dict[str, object]:
        """The state as the `health` method reports it."""
        return {
            "path": str(self.path),
            "restartRequired": self.restart_required,
            "changedSections": list(self.changed),
            "error": self.error,
        }


class ConfigWatcher:
    """Polls the config file and logs what a change means (see the module docstring)."""

    def __init__(
        self, loaded: LoadedConfig, *, env: Mapping[str, str], poll_seconds: float = 1.0
    ) -> None:
        """Watch the file `loaded` came from; `loaded.config` is what is running."""
        self.running = loaded.config
        self.env = env
        self.poll_seconds = poll_seconds
        self.state = ConfigState(path=loaded.path)
        self._signature = _signature(loaded.path)

    def check(self) -> bool:
        """Look at the file once; returns True when it changed since the last look."""
        signature = _signature(self.state.path)
        if signature == self._signature:
            return False
        self._signature = signature
        try:
            loaded = load_config(self.state.path, env=self.env)
        except ConfigError as exc:
            self.state.error = str(exc)
            log.error("config reload: %s; still running the configuration it started with", exc)
            return True
        self.state.error = None
        self.state.changed = changed_sections(self.running, loaded.config)
        if self.state.changed:
            log.warning(
                "configuration changed (%s); restart the gateway to apply",
                ", ".join(self.state.changed),
            )
        else:
            log.info("configuration file saved; it matches the running configuration")
        return True

    async def watch(self) -> None:
        """Poll until cancelled."""
        while True:
            await anyio.sleep(self.poll_seconds)
            self.check()
