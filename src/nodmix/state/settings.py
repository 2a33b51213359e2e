"""The `state` section resolved: which backend, and for PostgreSQL where and how."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodmix.config.loader import resolve_secret
from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError

DEFAULT_LEASE_SECONDS = 15.0
DEFAULT_POOL_SIZE = 8
DEFAULT_CONNECT_TIMEOUT = 5.0
URL_ENV = "NODMIX_DATABASE_URL"


@dataclass(frozen=True, slots=True)
class StateSettings:
    """`state.*` with defaults applied (`url` resolved from `${VAR}`)."""

    backend: str = "files"
    url: str | None = None
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    pool_size: int = DEFAULT_POOL_SIZE
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def shared(self) -> bool:
        """Whether replicas may share this state (a database backend)."""
        return self.backend == "postgres"


def state_settings(
    config: NodmixConfig, env: Mapping[str, str], *, file: str | None = None
) -> StateSettings:
    """The resolved `state` section.

    Raises:
        ConfigError: the postgres backend has no URL (names the key), or `${VAR}` is unset.
    """
    section = config.state
    backend = section.backend or "files"
    pg = section.postgres
    if backend != "postgres":
        return StateSettings()
    raw = pg.url if pg is not None and pg.url else None
    url = resolve_secret(raw, key="state.postgres.url", env=env) if raw else env.get(URL_ENV)
    if not url:
        raise ConfigError(
            f'state.backend is "postgres" but no database is named: set state.postgres.url '
            f"(a libpq URL such as postgresql://nodmix@db:5432/nodmix, or ${{VAR}}) or {URL_ENV}",
            file=file,
            key="state.postgres.url",
        )
    return StateSettings(
        backend="postgres",
        url=url,
        lease_seconds=float(pg.lease_seconds or DEFAULT_LEASE_SECONDS) if pg else 15.0,
        pool_size=int(pg.pool_size or DEFAULT_POOL_SIZE) if pg else DEFAULT_POOL_SIZE,
        connect_timeout=float(pg.connect_timeout_seconds or DEFAULT_CONNECT_TIMEOUT)
        if pg
        else DEFAULT_CONNECT_TIMEOUT,
    )


def redacted_url(url: str) -> str:
    """The URL without its password (for logs, errors and `nodmix status`)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable database url>"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
