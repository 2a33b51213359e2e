"""What `nodmix status` reports, gathered into one JSON-ready dict.

Nothing here changes state: the config is read, the gateway is looked up (its presence record
in the state dir, else the configured port on loopback) and asked `/health`, models get one
bounded probe each, and the session stores and the log are only read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nodmix import __version__
from nodmix.config.loader import LoadedConfig

HEALTH_TIMEOUT = 2.0
"""Seconds to wait for a gateway's `/health`."""
LAST_ERRORS = 5


def gateway_status(state_dir: Path, loaded: LoadedConfig, url: str | None) -> dict[str, Any]:
    """Whether this state dir's gateway answers, where, and what it says about itself."""
    from nodmix.gateway.locate import elsewhere, locate, probe

    target = locate(state_dir, loaded.config, os.environ, url=url)
    out: dict[str, Any] = {"running": False, "url": target.url}
    if target.record:
        out["pid"] = target.record.get("pid")
    found = probe(target, timeout=HEALTH_TIMEOUT)
    if not found.answering:
        out["detail"] = found.detail
        return out
    if not found.ours:
        out["detail"] = elsewhere(target, state_dir)
        return out
    health = found.health or {}
    out.update(
        running=True,
        version=health.get("version"),
        uptimeSeconds=health.get("uptimeSeconds"),
        auth=health.get("auth"),
    )
    if health.get("state"):  # the gateway refuses to write its state
        out["state"] = health["state"]
    return out


def agents_status(
    loaded: LoadedConfig, env: Mapping[str, str], *, probe: bool, timeout: float
) -> list[dict[str, Any]]:
    """Each agent's models, and (with `probe`) whether each answers."""
    import anyio

    from nodmix.agents import agent_ids, resolve_agent
    from nodmix.providers.probe import ProbeResult, probe_models
    from nodmix.providers.router import ProviderRouter, default_model_ref

    agents: list[dict[str, Any]] = []
    for agent_id in agent_ids(loaded.config):
        profile = resolve_agent(loaded.config, agent_id, env=env)
        models = [default_model_ref(profile.model, env), *profile.fallbacks]
        agents.append(
            {
                "id": profile.id,
                "name": profile.name,
                "models": list(dict.fromkeys(models)),
                "codeMode": _code_mode_on(profile.code_mode),
            }
        )
    if not probe:
        return agents

    async def run() -> dict[str, ProbeResult]:
        router = ProviderRouter(loaded.config.models, env)
        try:
            refs = [ref for agent in agents for ref in agent["models"]]
            return await probe_models(router, refs, timeout=timeout)
        finally:
            await router.aclose()

    results = anyio.run(run)
    for row in agents:
        row["probes"] = [results[ref].to_json() for ref in row["models"]]
    return agents


def _code_mode_on(value: Any) -> bool:
    return bool(getattr(value, "enabled", value))


def channels_status(loaded: LoadedConfig) -> list[dict[str, Any]]:
    """The `channels` section, if the config has one (each key a channel)."""
    channels = loaded.raw.get("channels") if isinstance(loaded.raw, dict) else None
    if not isinstance(channels, dict):
        return []
    out = []
    for name, value in channels.items():
        enabled = value.get("enabled", True) if isinstance(value, dict) else bool(value)
        out.append({"name": str(name), "enabled": bool(enabled)})
    return out


def mcp_status(loaded: LoadedConfig) -> list[dict[str, Any]]:
    """Configured MCP servers (not started: status never spawns anything); URLs without
    their credentials."""
    from nodmix.providers.debug import display_url

    return [
        {
            "name": name,
            "enabled": server.enabled,
            "transport": "stdio" if server.command else (server.transport or "streamable-http"),
            "target": server.command or display_url(server.url or ""),
        }
        for name, server in loaded.config.mcp.servers.items()
    ]


def code_mode_status(loaded: LoadedConfig) -> dict[str, Any]:
    """Whether code mode is on anywhere and whether its sandbox runtime is installed."""
    from nodmix.agents import agent_ids, resolve_agent
    from nodmix.sandbox import assets

    report = assets.status()
    enabled = [
        agent_id
        for agent_id in agent_ids(loaded.config)
        if _code_mode_on(resolve_agent(loaded.config, agent_id).code_mode)
    ]
    return {
        "runtime": "quickjs-wasi",
        "version": report.version,
        "installed": bool(report.installed),
        "enabledFor": enabled,
    }


def sessions_status(state_dir: Path, loaded: LoadedConfig) -> dict[str, int]:
    """Sessions per agent, from each agent's session store."""
    from nodmix.agents import agent_ids
    from nodmix.errors import NodmixError
    from nodmix.sessions.store import SessionStore

    counts: dict[str, int] = {}
    if loaded.config.state.backend == "postgres":
        return counts  # counted from the database by `_database_sessions`
    for agent_id in agent_ids(loaded.config):
        store = SessionStore.for_agent(state_dir, agent_id, durable=False)
        try:
            counts[agent_id] = len(store.load()) if store.path.exists() else 0
        except NodmixError:
            counts[agent_id] = -1
    return counts


def last_errors(state_dir: Path, count: int = LAST_ERRORS) -> list[dict[str, Any]]:
    """The last ERROR records of the structured log."""
    from nodmix.observability.logread import LEVELS, LogFilter, read_records
    from nodmix.observability.logs import log_file

    records = read_records(log_file(state_dir), LogFilter(min_level=LEVELS["error"]), last=count)
    return [{k: r.get(k) for k in ("ts", "logger", "msg", "code") if k in r} for r in records]


def gather(
    state_dir: Path,
    loaded: LoadedConfig,
    *,
    url: str | None = None,
    probe: bool = True,
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole status report."""
    env = dict(os.environ if env is None else env)
    state = state_status(state_dir, loaded, env)
    return {
        "version": __version__,
        "config": {"path": str(loaded.path), "exists": loaded.exists},
        "stateDir": str(state_dir),
        "gateway": gateway_status(state_dir, loaded, url),
        "agents": agents_status(loaded, env, probe=probe, timeout=timeout),
        "channels": channels_status(loaded),
        "mcpServers": mcp_status(loaded),
        "codeMode": code_mode_status(loaded),
        "sessions": sessions_status(state_dir, loaded),
        "state": state,
        "lastErrors": last_errors(state_dir),
    } | ({} if state.get("error") else _database_sessions(state_dir, loaded, env))


def _database_sessions(
    state_dir: Path, loaded: LoadedConfig, env: Mapping[str, str]
) -> dict[str, Any]:
    """`{"sessions": counts}` read from the state database (postgres backend), else nothing."""
    if loaded.config.state.backend != "postgres":
        return {}
    from nodmix.agents import agent_ids
    from nodmix.errors import NodmixError
    from nodmix.state.backend import open_state

    try:
        backend = open_state(loaded.config, env, state_dir, file=str(loaded.path))
    except NodmixError:
        return {}  # the state line says why
    try:
        sessions = backend.sessions()
        counts = {}
        for agent_id in agent_ids(loaded.config):
            try:
                counts[agent_id] = len(sessions.index(agent_id, durable=False).load())
            except NodmixError:
                counts[agent_id] = -1
        return {"sessions": counts}
    finally:
        backend.close()


def state_status(state_dir: Path, loaded: LoadedConfig, env: Mapping[str, str]) -> dict[str, Any]:
    """The state backend; for PostgreSQL its replicas and who runs which singleton."""
    from nodmix.errors import NodmixError
    from nodmix.state.backend import open_state

    try:
        backend = open_state(loaded.config, env, state_dir, file=str(loaded.path))
    except NodmixError as exc:
        return {"backend": loaded.config.state.backend or "files", "error": str(exc)}
    try:
        return backend.describe()
    except NodmixError as exc:
        return {"backend": backend.kind, "error": str(exc)}
    finally:
        backend.close()
