"""The optional PostgreSQL driver: a clear one-line hint when it is not installed."""

from __future__ import annotations

from nodmix.errors import ConfigError

INSTALL_HINT = "pip install 'nodmix[postgres]'"


def require_driver() -> None:
    """Import psycopg and its pool, or fail with the install hint.

    Raises:
        ConfigError: the `postgres` extra is not installed.
    """
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"the postgres state backend needs the PostgreSQL driver ({exc.name} is missing): "
            f"{INSTALL_HINT}",
            key="state.backend",
        ) from None
