"""`state`: where Nodmix keeps what it must remember (sessions, runs, jobs, pairing...).

`backend: "files"` (the default) keeps everything under `$NODMIX_STATE_DIR`, for one gateway
process. `backend: "postgres"` keeps it in a PostgreSQL database, so several gateway replicas
can serve one deployment (see docs/deployment.md).
"""

from typing import Annotated, Literal

import msgspec

from nodmix.config.section import Section


class PostgresStateConfig(Section, frozen=True):
    """`state.postgres`: the database of the `postgres` backend."""

    url: str | None = None
    """A libpq connection URL (`postgresql://user:pass@host:5432/nodmix`), or `${ENV_VAR}`;
    `NODMIX_DATABASE_URL` when unset."""
    lease_seconds: Annotated[float, msgspec.Meta(ge=1, le=600)] | None = None
    """How long a replica holds a singleton (a channel's poller, the cron scheduler, the
    heartbeat) without renewing it: another replica takes over within this after the holder
    dies. Default 15."""
    pool_size: Annotated[int, msgspec.Meta(ge=2, le=200)] | None = None
    """Database connections of one replica's pool. Default 8."""
    connect_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=120)] | None = None
    """How long to wait for the database to answer a connection. Default 5."""


class StateConfig(Section, frozen=True):
    """`state`."""

    backend: Literal["files", "postgres"] | None = None
    """`files` (default) or `postgres`."""
    postgres: PostgresStateConfig | None = None
