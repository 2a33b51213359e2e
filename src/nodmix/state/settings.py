"""The `state` section resolved: which backend, and for PostgreSQL where and how."""

from __future__ import annotations

import re
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
    file: str | None = None
    """The config file the settings came from (named in connection errors)."""

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
    url = _expanded(raw, env, file) if raw else env.get(URL_ENV)
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
        file=file,
        lease_seconds=float(pg.lease_seconds or DEFAULT_LEASE_SECONDS) if pg else 15.0,
        pool_size=int(pg.pool_size or DEFAULT_POOL_SIZE) if pg else DEFAULT_POOL_SIZE,
        connect_timeout=float(pg.connect_timeout_seconds or DEFAULT_CONNECT_TIMEOUT)
        if pg
        else DEFAULT_CONNECT_TIMEOUT,
    )


def _expanded(raw: str, env: Mapping[str, str], file: str | None) -> str:
    """`raw` with every `${VAR}` replaced, whole (`${NODMIX_DATABASE_URL}`) or inside the URL
    (`postgresql://nodmix:${PGPASSWORD}@db/nodmix`): a reference left as text would be sent
    as a literal password or host name and fail far from its cause."""
    try:
        whole = resolve_secret(raw, key="state.postgres.url", env=env)
    except ConfigError as exc:
        raise ConfigError(exc.detail, file=file, key=exc.key) from None
    if whole != raw or "${" not in raw:
        return whole or raw

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = env.get(name)
        if not found:
            raise ConfigError(
                f"refers to ${{{name}}}, which is not set in the environment",
                file=file,
                key="state.postgres.url",
            )
        return found

    expanded = _REFERENCE.sub(value, raw)
    left = re.search(r"\$\{[^}]*\}?", _REFERENCE.sub("", raw))
    if left:
        raise ConfigError(
            f"{left.group(0)} is not a variable reference Nodmix expands (only ${{NAME}}, "
            "without defaults); percent-encode a literal $ as %24",
            file=file,
            key="state.postgres.url",
        )
    return expanded


_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redacted_url(url: str) -> str:
    """The URL without its password (for logs, errors and `nodmix status`): in the user
    part, in a `?password=` parameter, or in a `key=value` connection string."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    if "://" not in url:  # libpq's keyword form: host=db password=...
        return _KEYWORD_PASSWORD.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "<unparsable database url>"
    if any(name.lower() == "password" for name, _ in query):
        hidden = [(n, "***" if n.lower() == "password" else v) for n, v in query]
        parts = parts._replace(query=urlencode(hidden, safe="*"))
    if parts.password is not None:
        user, _, host = parts.netloc.rpartition("@")
        parts = parts._replace(netloc=f"{user.partition(':')[0]}:***@{host}")
    return urlunsplit(parts)
