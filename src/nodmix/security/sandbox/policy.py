"""Which sessions are sandboxed, and the limits their commands run under.

`agents.defaults.sandbox.mode` (merged per agent) is `off`, `non-main` or `all`. With `non-main`,
every session of an agent except its `main` one (`agent:<id>:main`, the owner's own CLI and web
page) is sandboxed: sessions opened by name, through the API, or later by chat channels. A turn
in the main session that does not speak for the owner (a heartbeat, a cron job or webhook run
targeting it; `nodmix.origin.is_owner_turn`) is sandboxed too, or its commands could change
what the sandbox keeps read-only for such turns (`nodmix.security.workspace_guard`).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from nodmix.config.schema import SandboxConfig
from nodmix.origin import TurnOrigin, is_owner_turn
from nodmix.security.workspace_guard import DEFAULT_ACCESS, WorkspaceAccess
from nodmix.sessions.keys import DEFAULT_SESSION_NAME, KEY_PREFIX

SandboxMode: TypeAlias = Literal["off", "non-main", "all"]

DEFAULT_MODE: SandboxMode = "off"
DEFAULT_CPU_SECONDS = 600
DEFAULT_MEMORY_BYTES = 4 * 1024**3
DEFAULT_FILE_SIZE_BYTES = 1024**3


class SandboxSettings(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's resolved sandbox settings."""

    mode: SandboxMode = DEFAULT_MODE
    network: bool = False
    cpu_seconds: int = DEFAULT_CPU_SECONDS
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    file_size_bytes: int = DEFAULT_FILE_SIZE_BYTES
    workspace_access: WorkspaceAccess = DEFAULT_ACCESS

    @classmethod
    def from_config(cls, config: SandboxConfig | None) -> SandboxSettings:
        """Fill what `config` leaves unset with the defaults."""
        config = config or SandboxConfig()
        return cls(
            mode=config.mode or DEFAULT_MODE,
            network=bool(config.network),
            cpu_seconds=config.cpu_seconds or DEFAULT_CPU_SECONDS,
            memory_bytes=config.memory_bytes or DEFAULT_MEMORY_BYTES,
            file_size_bytes=config.file_size_bytes or DEFAULT_FILE_SIZE_BYTES,
            workspace_access=config.workspace_access or DEFAULT_ACCESS,
        )


def is_sandboxed(
    mode: SandboxMode, agent_id: str, session_key: str, origin: TurnOrigin | None = None
) -> bool:
    """Whether a turn (`origin`) in a session of `agent_id` runs its commands in the sandbox
    under `mode`: with `non-main`, the main session's own turns are not, unless they come
    from an automation run."""
    if mode == "all":
        return True
    if mode == "non-main":
        main = session_key == f"{KEY_PREFIX}:{agent_id}:{DEFAULT_SESSION_NAME}"
        return not main or not is_owner_turn(origin, agent_id, session_key)
    return False
