"""The service files: a systemd user unit and a launchd property list for the gateway."""

from __future__ import annotations

import plistlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

UNIT_NAME = "nodmix-gateway.service"
LAUNCHD_LABEL = "dev.nodmix.gateway"
KEPT_ENV = ("NODMIX_STATE_DIR", "NODMIX_CONFIG_PATH", "NODMIX_CACHE_DIR")
"""Variables of the installing shell the service keeps, so it serves the same state. Secrets
(API keys, the gateway token) stay out of the world-readable unit: the config refers to them."""


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """What the service runs: a command line, its environment and working directory."""

    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: Path = field(default_factory=Path.home)
    log_file: Path | None = None
    """launchd only: where the process's stdout and stderr go."""


def gateway_spec(
    python: str, args: Sequence[str], env: Mapping[str, str], *, log_file: Path | None = None
) -> ServiceSpec:
    """The gateway as `python -m nodmix gateway ARGS`, with the Nodmix variables of `env`."""
    kept = {k: env[k] for k in KEPT_ENV if env.get(k)}
    return ServiceSpec(argv=[python, "-m", "nodmix", "gateway", *args], env=kept, log_file=log_file)


def _systemd_quote(word: str) -> str:
    if word and not any(c in word for c in " \t\n\"'\\$%;"):
        return word
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$").replace("%", "%%")
    return f'"{escaped}"'


def systemd_unit(spec: ServiceSpec) -> str:
    """The `[Unit]`/`[Service]`/`[Install]` text of the user unit."""
    lines = [
        "# Written by `nodmix gateway install`; `nodmix gateway uninstall` removes it.",
        "[Unit]",
        "Description=Nodmix gateway (web page, OpenAI-compatible API, WebSocket)",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={' '.join(_systemd_quote(w) for w in spec.argv)}",
        f"WorkingDirectory={_systemd_quote(str(spec.workdir))}",
    ]
    lines += [f"Environment={_systemd_quote(f'{k}={v}')}" for k, v in sorted(spec.env.items())]
    lines += [
        "Restart=on-failure",
        "RestartSec=5",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=30",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def launchd_plist(spec: ServiceSpec) -> bytes:
    """The launchd agent's property list (XML)."""
    plist: dict[str, object] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(spec.argv),
        "WorkingDirectory": str(spec.workdir),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
    }
    if spec.env:
        plist["EnvironmentVariables"] = dict(spec.env)
    if spec.log_file is not None:
        plist["StandardOutPath"] = str(spec.log_file)
        plist["StandardErrorPath"] = str(spec.log_file)
    return plistlib.dumps(plist)
