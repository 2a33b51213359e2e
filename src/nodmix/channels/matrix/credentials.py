"""`channels.matrix` resolved: the homeserver, the account, and how to authenticate.

With `accessToken` the token is used as it is. With `password` the first start logs in and
keeps the new device id and its token in `<state>/channels/matrix/session.json` (mode 0600);
later starts reuse them, so a restart does not pile up devices on the account.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.channels.files import channels_dir, read_json
from nodmix.config.channel_schema import MatrixConfig
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

DEFAULT_TEXT_LIMIT = 16000
DEFAULT_DEVICE_NAME = "Nodmix"


@dataclass(frozen=True, slots=True)
class MatrixSettings:
    """Resolved `channels.matrix`."""

    homeserver: str
    user_id: str
    access_token: str | None = None
    password: str | None = None
    device_name: str = DEFAULT_DEVICE_NAME
    text_limit: int = DEFAULT_TEXT_LIMIT
    channel: str = "matrix"


def matrix_settings(section: MatrixConfig, env: Mapping[str, str]) -> MatrixSettings:
    """Resolve the section (secrets from `${VAR}` or `MATRIX_ACCESS_TOKEN`).

    Raises:
        ConfigError: a required key is missing.
    """
    if not section.homeserver:
        raise ConfigError("no homeserver URL", key="channels.matrix.homeserver")
    user_id = section.user_id or ""
    if not (user_id.startswith("@") and ":" in user_id):
        raise ConfigError(
            "needs the full user id, like @nodmix:example.org", key="channels.matrix.userId"
        )
    token = resolve_secret(section.access_token, key="channels.matrix.accessToken", env=env)
    token = token or env.get("MATRIX_ACCESS_TOKEN")
    password = resolve_secret(section.password, key="channels.matrix.password", env=env)
    if not token and not password:
        raise ConfigError(
            "no credentials: set channels.matrix.accessToken (or MATRIX_ACCESS_TOKEN) "
            "or channels.matrix.password",
            key="channels.matrix.accessToken",
        )
    return MatrixSettings(
        homeserver=section.homeserver.rstrip("/"),
        user_id=user_id,
        access_token=token or None,
        password=None if token else password,
        device_name=section.device_name or DEFAULT_DEVICE_NAME,
        text_limit=section.text_limit or DEFAULT_TEXT_LIMIT,
    )


@dataclass(frozen=True, slots=True)
class StoredLogin:
    """A device created by a password login."""

    user_id: str
    device_id: str
    access_token: str


def session_path(state_dir: Path, channel: str) -> Path:
    """Where a password login's device and token are kept."""
    return channels_dir(state_dir) / channel / "session.json"


def load_login(state_dir: Path, settings: MatrixSettings) -> StoredLogin | None:
    """The kept login of this account on this homeserver, if any."""
    data = read_json(session_path(state_dir, settings.channel), {})
    if data.get("homeserver") != settings.homeserver or data.get("userId") != settings.user_id:
        return None
    device, token = data.get("deviceId"), data.get("accessToken")
    if not isinstance(device, str) or not isinstance(token, str):
        return None
    return StoredLogin(settings.user_id, device, token)


def save_login(state_dir: Path, settings: MatrixSettings, login: StoredLogin) -> None:
    """Keep a login (atomically, readable by the owner only)."""
    path = session_path(state_dir, settings.channel)
    ensure_private_dir(path.parent)
    body = {
        "homeserver": settings.homeserver,
        "userId": login.user_id,
        "deviceId": login.device_id,
        "accessToken": login.access_token,
    }
    atomic_write(path, json.dumps(body, indent=1).encode("utf-8"))
    os.chmod(path, 0o600)


def forget_login(state_dir: Path, settings: MatrixSettings) -> None:
    """Drop a kept login the homeserver no longer accepts."""
    session_path(state_dir, settings.channel).unlink(missing_ok=True)
