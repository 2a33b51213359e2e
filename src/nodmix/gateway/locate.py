"""Finding the running gateway of this state dir, and its token, the same way for every command.

`nodmix agent`, `status`, `doctor`, `config set`, `channels status` and `gateway url` all ask
`locate()`:

- the URL: `--url`, else the gateway recorded in `<state>/gateway.json` (any port, port 0
  included, while its process lives), else the configured port on loopback;
- the token: `--token`, else `NODMIX_GATEWAY_TOKEN`, else the recorded gateway's own (when the
  URL is the recorded one), else `gateway.auth.token`, else the state dir's own token file,
  again only for the recorded gateway: the token a gateway made for itself is never sent
  anywhere else (not to another URL, not to whatever answers on the configured port).

`probe()` then asks `/health` and tells whether the gateway that answers is this state dir's:
its instance id must be the recorded one. A gateway answering on the configured port with no
record here serves another state dir (or was started by something else), and commands say so
rather than claim it.

Light on purpose: no Starlette, no uvicorn, `httpx2` only when probing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError
from nodmix.gateway.presence import read_presence

DEFAULT_PORT = 18789
TOKEN_ENV = "NODMIX_GATEWAY_TOKEN"
PROBE_TIMEOUT = 2.0

Source = Literal["flag", "record", "config"]


@dataclass(frozen=True, slots=True)
class GatewayTarget:
    """Where the gateway of this state dir should be, and the token to send it."""

    url: str
    token: str | None
    source: Source
    """`flag` (`--url`), `record` (`gateway.json`) or `config` (the configured port)."""
    record: Mapping[str, Any] | None = None
    """The live `gateway.json` record, when there is one."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What `/health` at a target said."""

    answering: bool
    ours: bool
    """The gateway that answers serves this state dir (or is the one `--url` names)."""
    health: Mapping[str, Any] | None = None
    detail: str = ""


def locate(
    state_dir: Path,
    config: NodmixConfig,
    env: Mapping[str, str],
    *,
    url: str | None = None,
    token: str | None = None,
) -> GatewayTarget:
    """The gateway this state dir's commands talk to (see the module docstring)."""
    record = read_presence(state_dir)
    recorded = str(record["url"]).rstrip("/") if record else None
    if url:
        chosen, source = url.rstrip("/"), "flag"
    elif recorded:
        chosen, source = recorded, "record"
    else:
        chosen, source = f"http://127.0.0.1:{config.gateway.port or DEFAULT_PORT}", "config"
    own_record = record if record is not None and recorded == chosen else None
    return GatewayTarget(
        url=chosen,
        token=_token(state_dir, config, env, token, own_record),
        source=source,  # type: ignore[arg-type]
        record=own_record,
    )


def _token(
    state_dir: Path,
    config: NodmixConfig,
    env: Mapping[str, str],
    given: str | None,
    record: Mapping[str, Any] | None,
) -> str | None:
    if given:
        return given
    if env.get(TOKEN_ENV, "").strip():
        return env[TOKEN_ENV].strip()
    if record is not None and isinstance(record.get("token"), str) and record["token"]:
        return str(record["token"])
    from nodmix.config.loader import resolve_secret

    configured = None
    with contextlib.suppress(ConfigError):  # `${VAR}` unset in this shell: try the file
        configured = resolve_secret(config.gateway.auth.token, key="gateway.auth.token", env=env)
    if configured and configured.strip():
        return configured.strip()
    if record is None:
        return None  # the state dir's own token goes to its own gateway only
    from nodmix.gateway.token import open_token_store

    return open_token_store(state_dir).load()


def probe(target: GatewayTarget, *, timeout: float = PROBE_TIMEOUT) -> Probe:
    """Ask `/health` (public: it needs no token) and compare the instance id."""
    import httpx2

    try:
        response = httpx2.get(f"{target.url}/health", timeout=timeout)
    except httpx2.HTTPError as exc:
        return Probe(answering=False, ours=False, detail=f"not answering ({type(exc).__name__})")
    if response.status_code != 200:
        return Probe(answering=False, ours=False, detail=f"/health answered {response.status_code}")
    try:
        health = response.json()
    except ValueError:
        return Probe(answering=False, ours=False, detail="/health did not answer JSON")
    if not isinstance(health, dict):
        return Probe(answering=False, ours=False, detail="/health did not answer an object")
    return Probe(answering=True, ours=_ours(target, health), health=health)


def _ours(target: GatewayTarget, health: Mapping[str, Any]) -> bool:
    if target.record is None:
        # `--url` names a gateway on purpose; the configured port without a record of a
        # running gateway here is someone else's (another state dir, another user).
        return target.source == "flag"
    recorded = target.record.get("instance")
    return recorded is None or recorded == health.get("instance")  # None: an older record


def elsewhere(target: GatewayTarget, state_dir: Path) -> str:
    """Why the gateway answering at `target` is not this state dir's (one line)."""
    return (
        f"the gateway answering at {target.url} does not serve {state_dir} "
        "(another state dir or user); no gateway of this state dir is running"
    )


def page_url(url: str, token: str | None) -> str:
    """The web page's address; with a token, carrying it in the fragment (`#token=...`),
    which browsers never send to the server, so it stays out of access logs and `Referer`s.
    The page keeps it and drops it from the address bar."""
    if not token:
        return f"{url}/"
    from urllib.parse import quote

    return f"{url}/#token={quote(token, safe='')}"
