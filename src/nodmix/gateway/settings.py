"""Where the gateway listens and who may talk to it: `GatewaySettings` and how it is resolved.

Precedence for every value: the command line, then the environment, then `gateway.*` in
`nodmix.json`, then the built-in default. The token is the one secret here; it is resolved
once at start (`${ENV}` references included) and never logged.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from nodmix.config.loader import resolve_secret
from nodmix.config.schema import BIND_ALIASES, GatewayConfig
from nodmix.errors import ConfigError

if TYPE_CHECKING:
    from nodmix.automation.clock import Clock

DEFAULT_PORT = 18789
DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_REQUEST_TIMEOUT_SECONDS = 30.0
DEFAULT_KEEP_ALIVE_SECONDS = 5.0
DEFAULT_MAX_CONNECTIONS = 1000
TOKEN_ENV = "NODMIX_GATEWAY_TOKEN"

_BIND_ALIASES = BIND_ALIASES


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings:
    """How one gateway process serves."""

    host: str = "127.0.0.1"
    """The address to bind (`loopback` and `lan` are already resolved to addresses)."""
    port: int = DEFAULT_PORT
    """TCP port; 0 picks a free one (tests)."""
    token: str | None = None
    """Bearer token every API and WebSocket request must carry. `None` with `auth_mode`
    `token` (the default): `run_gateway` uses the state dir's own token, creating it
    (`nodmix.gateway.token`); once serving, `token` is the one in force."""
    auth_mode: Literal["token", "none"] = "token"
    """`none` serves without authentication (loopback only; `gateway.auth.mode: "none"`)."""
    instance: str = field(default_factory=lambda: secrets.token_hex(8))
    """This gateway process's random id: `/health` reports it and `gateway.json` records it,
    so a client can tell the gateway of its own state dir from another on the same port."""
    verbose: bool = False
    """Debug logging and uvicorn's access log."""
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    """On shutdown, how long running turns may take to finish before they are cancelled."""
    watch_config: bool = True
    """Poll the config file and report changes (see `nodmix.gateway.reload`)."""
    config_poll_seconds: float = 1.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest request body or WebSocket message; a larger body is refused with 413."""
    request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS
    """Time a client gets to send a request's headers, and again its body (slow clients)."""
    keep_alive_seconds: float = DEFAULT_KEEP_ALIVE_SECONDS
    """An idle keep-alive connection is closed after this long."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Connections beyond this many are refused at once with 503 (bounded file descriptors)."""
    automation_clock: Clock | None = None
    """The scheduler's clock; None is real time (tests pass a `ManualClock`)."""

    @property
    def loopback_only(self) -> bool:
        """Whether only this machine can reach the listener."""
        return is_loopback(self.host)

    @property
    def url(self) -> str:
        """The base URL a local client uses (`0.0.0.0` is reached through loopback)."""
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


def resolve_bind(bind: str | None) -> str:
    """`loopback` (default), `lan` or a literal address -> the address to bind.

    Raises:
        ConfigError: the value is neither an alias nor an IP address.
    """
    text = (bind or "loopback").strip()
    if text in _BIND_ALIASES:
        return _BIND_ALIASES[text]
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        raise ConfigError(
            f"invalid bind {text!r}: use loopback, lan or an IP address", key="gateway.bind"
        ) from None


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) is a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_settings(
    config: GatewayConfig,
    env: Mapping[str, str],
    *,
    port: int | None = None,
    bind: str | None = None,
    token: str | None = None,
    verbose: bool = False,
) -> GatewaySettings:
    """Merge command-line values over the environment and the `gateway` config section.

    Raises:
        ConfigError: the bind address is invalid, the token refers to an unset variable, or
            the gateway would listen beyond loopback without a token.
    """
    host = resolve_bind(bind or config.bind)
    chosen_port = port if port is not None else (config.port or DEFAULT_PORT)
    if not 0 <= chosen_port <= 65535:
        raise ConfigError(f"invalid port {chosen_port}", key="gateway.port")
    mode = config.auth.mode or "token"
    secret = None
    if mode == "token":
        secret = (
            token
            or env.get(TOKEN_ENV)
            or resolve_secret(config.auth.token, key="gateway.auth.token", env=env)
        )
        secret = secret.strip() if secret else None
    settings = GatewaySettings(
        host=host,
        port=chosen_port,
        token=secret or None,
        auth_mode=mode,
        verbose=verbose,
        max_body_bytes=config.max_body_bytes or DEFAULT_MAX_BODY_BYTES,
        request_timeout_seconds=config.request_timeout_seconds or DEFAULT_REQUEST_TIMEOUT_SECONDS,
        keep_alive_seconds=config.keep_alive_seconds or DEFAULT_KEEP_ALIVE_SECONDS,
        max_connections=config.max_connections or DEFAULT_MAX_CONNECTIONS,
    )
    if settings.token is None and not settings.loopback_only:
        # The token a gateway makes itself is for this machine; one the network sees is
        # chosen (and handed to clients) on purpose.
        why = ' (gateway.auth.mode is "none")' if mode == "none" else ""
        raise ConfigError(
            f"refusing to listen on {host} without a token{why}: set gateway.auth.token, "
            f"{TOKEN_ENV} or --token (or bind to loopback)"
        )
    return settings


def with_token(settings: GatewaySettings, state_dir: Path) -> GatewaySettings:
    """`settings` with the token in force: the given one, else the state dir's own (made
    now on a first start); none with `auth_mode` `none`."""
    if settings.auth_mode == "none":
        return replace(settings, token=None)
    if settings.token:
        return settings
    from nodmix.gateway.token import open_token_store

    return replace(settings, token=open_token_store(state_dir).load_or_create())
