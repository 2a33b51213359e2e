"""Where Nodmix keeps its state, config and caches."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nodmix.errors import ConfigError

DEFAULT_AGENT_ID = "main"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$NODMIX_STATE_DIR`, else `~/.nodmix`."""
    env = os.environ if env is None else env
    value = env.get("NODMIX_STATE_DIR")
    return Path(value).expanduser() if value else Path.home() / ".nodmix"


def ensure_state_dir(state: Path) -> Path:
    """Create the state directory if it is missing, readable by its owner only (0700).

    It holds conversations and credentials in config. An existing directory keeps its mode:
    it may be one the user chose and shares on purpose.

    Raises:
        ConfigError: the path (or a parent) is a file.
    """
    try:
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(
            f"the state directory {state} is a file, not a directory;"
            " set NODMIX_STATE_DIR to a directory"
        ) from None
    except NotADirectoryError:
        raise ConfigError(
            f"the state directory {state} cannot be created: a parent is a file;"
            " set NODMIX_STATE_DIR to a directory"
        ) from None
    return state


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """`$NODMIX_CONFIG_PATH`, else `<state dir>/nodmix.json`."""
    env = os.environ if env is None else env
    value = env.get("NODMIX_CONFIG_PATH")
    return Path(value).expanduser() if value else state_dir(env) / "nodmix.json"


def sessions_dir(state: Path, agent_id: str) -> Path:
    """`<state>/agents/<agentId>/sessions`: the session store and transcripts of one agent."""
    return state / "agents" / agent_id / "sessions"


def default_workspace(state: Path) -> Path:
    """The default agent workspace, `<state>/workspace`."""
    return state / "workspace"
