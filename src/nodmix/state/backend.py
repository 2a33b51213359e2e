"""The state backend of a process: files under the state directory, or a PostgreSQL database
shared by several gateway replicas.

`open_state()` is called by the composition root (`Runtime.open`) and by CLI commands that
touch state. For `state.backend: "postgres"` it connects, migrates the schema and binds the
database to the state directory (`stores.bind`), so every domain's `open_*` function from
then on opens the database store instead of the file one. The files backend binds nothing:
its cost is nothing at all.

A new durable store plugs in the same way (docs/state.md): a file store plus an `open_*`
function in its own package that asks `stores.provided(state_dir, "<domain>", ...)`, and a
PostgreSQL store in `state/postgres/<domain>.py` registered in `PostgresState.provide`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from nodmix.config.schema import NodmixConfig
from nodmix.coordination import Coordination, LocalCoordination
from nodmix.sessions.backend import FileSessions, SessionBackend
from nodmix.state.settings import state_settings


class StateBackend(Protocol):
    """What the runtime and the gateway use of the state backend."""

    kind: str
    state_dir: Path
    coordination: Coordination

    def sessions(self) -> SessionBackend:
        """Where sessions are stored."""
        ...

    def describe(self) -> dict[str, Any]:
        """Backend, replicas and singleton holders (`nodmix status`)."""
        ...

    def problem(self) -> str | None:
        """Why the backend refuses to be written now (a newer schema), in one line."""
        ...

    def close(self) -> None:
        """Release connections (and, for a database, this replica's leases)."""
        ...


class FileState:
    """Everything under the state directory; one process (the default)."""

    kind = "files"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.coordination: Coordination = LocalCoordination()

    def sessions(self) -> SessionBackend:
        """Session files."""
        return FileSessions(self.state_dir)

    def describe(self) -> dict[str, Any]:
        """Just the state directory."""
        return {"backend": "files", "stateDir": str(self.state_dir)}

    def problem(self) -> str | None:
        """Never: the files are this process's own."""
        return None

    def close(self) -> None:
        """Nothing to close."""


def open_state(
    config: NodmixConfig,
    env: Mapping[str, str],
    state_dir: Path,
    *,
    file: str | None = None,
    role: str = "cli",
) -> StateBackend:
    """The configured backend, connected (and migrated) and bound to `state_dir`.

    Raises:
        ConfigError: the `state` section is incomplete, or the driver is not installed.
        StateUnavailableError: the database cannot be reached or is too new.
    """
    settings = state_settings(config, env, file=file)
    if not settings.shared:
        return FileState(state_dir)
    from nodmix.state.postgres.backend import PostgresState

    return PostgresState.open(settings, state_dir, role=role)


def cli_resolver(state_dir: Path) -> Any:
    """The backend a CLI command finds for `state_dir` (`stores.set_resolver`): the config's,
    opened on first use and closed when the process exits; None for files."""
    import atexit
    import os

    from nodmix.config import paths
    from nodmix.config.loader import load_config

    env = dict(os.environ)
    if paths.state_dir(env).absolute() != state_dir:
        return None  # a state dir of another config (tests, migrations): files
    loaded = load_config(env=env)
    backend = open_state(loaded.config, env, state_dir, file=str(loaded.path), role="cli")
    if backend.kind == "files":
        return None
    atexit.register(backend.close)
    return backend
