"""Applying config file changes while the gateway runs.

A background task polls the file (once a second) and, on a change:

- an invalid file is reported in one log line and ignored: the gateway keeps running on the
  config it had;
- a valid file is applied: `models`, `agents`, `tools`, `plugins` and `mcp` take effect for the
  next turn (`runtime/reconfigure.py`; turns already running finish on what they started
  with). A changed `gateway` section (port, bind, token) belongs to the listening socket: it is
  reported as "restart the gateway to apply". `health` (WebSocket) exposes the same state, so
  the web page can say so.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import msgspec

from nodmix.config.loader import LoadedConfig, load_config
from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError

log = logging.getLogger("nodmix.gateway")

_Signature = tuple[int, int, int] | None
Apply = Callable[[LoadedConfig, list[str]], Awaitable[list[str]]]
"""Applies the live sections of a new config; returns the sections it applied."""


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
    """Sections that differ from the running config and wait for a restart."""
    applied: list[str] = field(default_factory=list)
    """Sections the latest change applied live."""
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
            "appliedSections": list(self.applied),
            "error": self.error,
        }


class ConfigWatcher:
    """Polls the config file and applies or reports a change (see the module docstring)."""

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        env: Mapping[str, str],
        poll_seconds: float = 1.0,
        apply: Apply | None = None,
    ) -> None:
        """Watch the file `loaded` came from; `loaded.config` is what is running. Without
        `apply` every change waits for a restart."""
        self.running = loaded.config
        self.apply = apply
        self._pending: LoadedConfig | None = None
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
        self._pending = loaded if self.apply is not None and self.state.changed else None
        if self._pending is not None:
            return True
        if self.state.changed:
            log.warning(
                "configuration changed (%s); restart the gateway to apply",
                ", ".join(self.state.changed),
            )
        else:
            log.info("configuration file saved; it matches the running configuration")
        return True

    async def check_and_apply(self) -> bool:
        """`check()`, then apply what can be applied live; True when the file changed."""
        if not self.check():
            return False
        loaded, self._pending = self._pending, None
        if loaded is None or self.apply is None:
            return True
        changed = list(self.state.changed)
        try:
            applied = await self.apply(loaded, changed)
        except Exception as exc:  # a config that loads but cannot be built: keep the old one
            self.state.error = str(exc)
            log.error("config reload: %s; still running the previous configuration", exc)
            return True
        live = {name: getattr(loaded.config, name) for name in applied}
        self.running = msgspec.structs.replace(self.running, **live)
        self.state.applied = applied
        self.state.changed = changed_sections(self.running, loaded.config)
        if self.state.changed:
            log.warning(
                "configuration changed (%s); restart the gateway to apply",
                ", ".join(self.state.changed),
            )
        return True

    async def watch(self) -> None:
        """Poll until cancelled."""
        while True:
            await anyio.sleep(self.poll_seconds)
            await self.check_and_apply()
