"""Installing, removing, restarting and inspecting the gateway's user service.

`service_manager()` picks systemd (Linux) or launchd (macOS). Each action is a list of service
manager commands; they run only when that manager is actually running (systemd booted, or
macOS), otherwise the file is still written and the commands are shown for the user to run
where it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nodmix.assets.files import atomic_write
from nodmix.errors import NodmixError
from nodmix.service.units import (
    LAUNCHD_LABEL,
    UNIT_NAME,
    ServiceSpec,
    launchd_plist,
    systemd_unit,
)

COMMAND_TIMEOUT = 30.0
"""Seconds one `systemctl`/`launchctl` call may take."""


@dataclass(frozen=True, slots=True)
class ServiceManager:
    """One service manager: where its file goes and which commands do what."""

    kind: str
    """`systemd` or `launchd`."""
    path: Path
    available: bool
    """Whether the manager is running here, so its commands can be run."""
    uid: int = 0

    def render(self, spec: ServiceSpec) -> bytes:
        """The service file for `spec`."""
        if self.kind == "launchd":
            return launchd_plist(spec)
        return systemd_unit(spec).encode()

    def commands(self, action: str) -> list[list[str]]:
        """The commands of `install`, `uninstall`, `restart` or `status`."""
        if self.kind == "launchd":
            target = f"gui/{self.uid}"
            job = f"{target}/{LAUNCHD_LABEL}"
            return {
                "install": [["launchctl", "bootstrap", target, str(self.path)]],
                "uninstall": [["launchctl", "bootout", job]],
                "restart": [["launchctl", "kickstart", "-k", job]],
                "status": [["launchctl", "print", job]],
            }[action]
        ctl = ["systemctl", "--user"]
        return {
            "install": [[*ctl, "daemon-reload"], [*ctl, "enable", "--now", UNIT_NAME]],
            "uninstall": [[*ctl, "disable", "--now", UNIT_NAME], [*ctl, "daemon-reload"]],
            "restart": [[*ctl, "restart", UNIT_NAME]],
            "status": [[*ctl, "is-active", UNIT_NAME]],
        }[action]

    def write(self, spec: ServiceSpec) -> Path:
        """Write the service file (atomically, parents created)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, self.render(spec))
        self.path.chmod(0o644)
        return self.path

    def run(self, action: str, *, check: bool = True) -> list[subprocess.CompletedProcess[str]]:
        """Run the action's commands in order; with `check`, a failing one is an error.

        Raises:
            NodmixError: the manager is not running here, or a command failed.
        """
        if not self.available:
            raise NodmixError(f"{self.kind} is not running on this machine")
        done: list[subprocess.CompletedProcess[str]] = []
        for argv in self.commands(action):
            try:
                result = subprocess.run(
                    argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
                )
            except subprocess.TimeoutExpired:
                raise NodmixError(
                    f"`{' '.join(argv)}` did not finish in {COMMAND_TIMEOUT:g}s"
                ) from None
            done.append(result)
            if check and result.returncode != 0:
                reason = (result.stderr or result.stdout).strip().splitlines()
                raise NodmixError(
                    f"`{' '.join(argv)}` failed: {reason[-1] if reason else result.returncode}"
                )
        return done


def service_manager(
    env: Mapping[str, str] | None = None, *, platform: str | None = None
) -> ServiceManager:
    """The service manager of this machine (or of `platform`: `linux`, `darwin`)."""
    env = os.environ if env is None else env
    platform = platform or sys.platform
    home = Path(env.get("HOME") or Path.home())
    if platform == "darwin":
        path = home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
        return ServiceManager("launchd", path, available=sys.platform == "darwin", uid=os.getuid())
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    path = config_home / "systemd" / "user" / UNIT_NAME
    return ServiceManager("systemd", path, available=systemd_running())


def systemd_running() -> bool:
    """Whether this machine was booted with systemd and `systemctl` is on PATH."""
    return Path("/run/systemd/system").is_dir() and shutil.which("systemctl") is not None


def shown(commands: Sequence[Sequence[str]]) -> str:
    """Commands as one shell line."""
    import shlex

    return " && ".join(shlex.join(c) for c in commands)
