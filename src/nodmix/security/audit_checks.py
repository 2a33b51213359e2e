"""The checks of `nodmix security audit`, each a function from `AuditInputs` to findings.

Sections that other parts of Nodmix may add to the config (`tools.exec.security`, `channels`,
`gateway.tools`) are read defensively with `getattr`, so the audit works with and without them.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from nodmix.agents import agent_ids, resolve_agent
from nodmix.config.schema import BIND_ALIASES
from nodmix.errors import ConfigError
from nodmix.security.audit_allowlist import check_allowlist_breadth
from nodmix.security.audit_channels import check_channel_identity
from nodmix.security.audit_phone import check_phone_channels
from nodmix.security.audit_sharing import SHARING_CHECKS
from nodmix.security.audit_web import check_browser, check_web_search
from nodmix.security.audit_workspace import check_mcp_in_workspace, check_workspace_access
from nodmix.security.findings import AuditInputs, Check, Finding, Severity
from nodmix.security.sandbox.bwrap import check_sandbox
from nodmix.security.sandbox.policy import SandboxSettings
from nodmix.tools.policy import ToolPolicy

MIN_TOKEN_LENGTH = 24
MAX_STATE_ENTRIES = 20_000
TOKEN_ENV = "NODMIX_GATEWAY_TOKEN"
_ENV_REF = re.compile(r"^\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}$")
_NEW_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def _bind_host(inputs: AuditInputs) -> str:
    text = (inputs.config.gateway.bind or "loopback").strip()
    return BIND_ALIASES.get(text, text)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _gateway_token(inputs: AuditInputs) -> str | None:
    if auth_none(inputs):
        return None  # a configured token is not asked for
    token = inputs.env.get(TOKEN_ENV) or inputs.config.gateway.auth.token
    if token is None:
        return None
    match = _ENV_REF.match(token.strip())
    if match:
        token = inputs.env.get(match.group("name"))
    if not token or not token.strip():
        return None
    return token.strip()


def auth_none(inputs: AuditInputs) -> bool:
    """Whether the gateway serves without any token (`gateway.auth.mode: "none"`); otherwise
    it has one, configured or its own (`<state>/gateway/token`)."""
    return inputs.config.gateway.auth.mode == "none"


def _exposed(inputs: AuditInputs) -> bool:
    """Whether people other than the owner can reach the assistant (network or channels)."""
    return not _is_loopback(_bind_host(inputs)) or bool(_channels(inputs))


def check_gateway(inputs: AuditInputs) -> list[Finding]:
    """A gateway reachable from the network without a token, or with a short one."""
    host = _bind_host(inputs)
    token = _gateway_token(inputs)
    found: list[Finding] = []
    if not _is_loopback(host) and token is None:
        none = auth_none(inputs)
        found.append(
            Finding(
                id="gateway.bind-without-token",
                severity="high",
                title=f"the gateway is configured to listen on {host} without a token"
                + (' (gateway.auth.mode is "none")' if none else ""),
                detail="anyone who can reach this machine could run agent turns and tools; "
                "the gateway refuses to start this way.",
                fix=("remove gateway.auth.mode and " if none else "")
                + f"set gateway.auth.token (or {TOKEN_ENV}) to a long random value "
                f"({_NEW_TOKEN}), or set gateway.bind to loopback",
            )
        )
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        found.append(
            Finding(
                id="gateway.short-token",
                severity="medium" if _is_loopback(host) else "high",
                title=f"the gateway token is short ({len(token)} characters)",
                detail=f"tokens under {MIN_TOKEN_LENGTH} characters can be guessed.",
                fix=f"replace gateway.auth.token with a random one: {_NEW_TOKEN}",
            )
        )
    tools = getattr(inputs.config.gateway, "tools", None)
    if getattr(tools, "allow_unauthenticated", False) and auth_none(inputs):
        found.append(
            Finding(
                id="gateway.tools-unauthenticated",
                severity="medium",
                title="/tools/invoke runs exec for any local process (no token)",
                detail="gateway.tools.allowUnauthenticated is true and gateway.auth.mode "
                'is "none".',
                fix='remove gateway.auth.mode "none", or gateway.tools.allowUnauthenticated',
            )
        )
    return found


def _walk(root: Path) -> Iterator[Path]:
    """`root` and what is under it, symlinks not followed, at most MAX_STATE_ENTRIES paths."""
    yield root
    count = 0
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            count += 1
            if count > MAX_STATE_ENTRIES:
                return
            yield Path(folder, name)


def _has_literal_secret(inputs: AuditInputs) -> bool:
    config = inputs.config
    values = [p.api_key for p in config.models.providers.values()] + [config.gateway.auth.token]
    return any(v is not None and not _ENV_REF.match(v.strip()) for v in values)


def check_state_permissions(inputs: AuditInputs) -> list[Finding]:
    """World-writable or world-readable state (transcripts, config, suspended runs)."""
    state = inputs.state_dir
    if not state.is_dir():
        return []
    writable: list[Path] = []
    readable: list[Path] = []
    for path in _walk(state):
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            continue
        if mode & stat.S_IWOTH:
            writable.append(path)
        elif mode & stat.S_IROTH:
            readable.append(path)
    found: list[Finding] = []
    if writable:
        found.append(
            Finding(
                id="state.world-writable",
                severity="high",
                title=f"{len(writable)} path(s) in the state dir are writable by every user",
                detail=f"for example {writable[0]}: another user could change config, "
                "sessions or suspended runs.",
                fix=f"chmod -R go-rwx {state}",
            )
        )
    dir_open = bool(state.stat().st_mode & stat.S_IXOTH)
    files = [p for p in readable if not p.is_dir()]
    if readable:
        severity: Severity = "high" if dir_open and files else "medium" if dir_open else "low"
        example = (files or readable)[0]
        found.append(
            Finding(
                id="state.world-readable",
                severity=severity,
                title=f"{len(readable)} path(s) in the state dir are readable by every user",
                detail=f"for example {example}"
                + (
                    ": other users can read transcripts, suspended runs and keys."
                    if severity == "high"
                    else ": other users can list it."
                    if dir_open
                    else "; the state dir itself is closed to others, which protects them for now."
                ),
                fix=f"chmod -R go-rwx {state}",
            )
        )
    found += _config_file_finding(inputs)
    return found


def _config_file_finding(inputs: AuditInputs) -> list[Finding]:
    path = inputs.config_path
    if path.is_relative_to(inputs.state_dir) or not path.is_file():
        return []  # inside the state dir: covered above
    mode = path.stat().st_mode
    if mode & stat.S_IWOTH or (mode & stat.S_IROTH and _has_literal_secret(inputs)):
        return [
            Finding(
                id="config.exposed",
                severity="high",
                title=f"the config file {path} is open to every user",
                detail="it is world-writable or holds literal keys and is world-readable.",
                fix=f"chmod 600 {path} (and prefer ${{ENV_VAR}} references for keys)",
            )
        ]
    return []


def _writable_by_others(path: Path, *, ancestor: bool) -> tuple[Path, str] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_uid not in (0, os.getuid()):
        return path, f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        if ancestor and st.st_mode & stat.S_ISVTX:
            return None  # sticky (/tmp): others cannot replace what we own inside it
        return path, f"{path} is writable by group or others"
    return None


def check_plugin_paths(inputs: AuditInputs) -> list[Finding]:
    """Plugins loaded from paths other users can write: their code runs as the gateway."""
    found: list[Finding] = []
    base = inputs.config_path.parent
    for text in inputs.config.plugins.load.paths:
        path = Path(text).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.exists():
            continue
        path = path.resolve()
        problems = [_writable_by_others(path, ancestor=False)]
        problems += [_writable_by_others(p, ancestor=True) for p in path.parents]
        if path.is_dir():
            problems += [_writable_by_others(p, ancestor=False) for p in _walk(path)]
        problem = next((p for p in problems if p), None)
        if problem:
            where, why = problem
            found.append(
                Finding(
                    id="plugins.writable-path",
                    severity="high",
                    title=f"plugin path {text} can be changed by other users",
                    detail=f"{why}; its code runs with the gateway's rights.",
                    fix=f"move the plugin where only you can write, or chmod go-w {where}",
                )
            )
    return found


def _exec_available(inputs: AuditInputs, agent_tools: Any) -> bool:
    policy = ToolPolicy.from_config(inputs.config.tools).merged(agent_tools)
    if policy.disables_tools:
        return False
    from nodmix.tools.core import core_tools

    return any(t.spec.name == "exec" for t in policy.filter(core_tools(inputs.config.tools)))


def check_exec_sandbox(inputs: AuditInputs) -> list[Finding]:
    """`exec` with full rights and no sandbox in sessions that are not the owner's main one."""
    found: list[Finding] = []
    failures: dict[SandboxSettings, str | None] = {}  # one start per distinct setting
    security = getattr(inputs.config.tools.exec, "security", None) or "full"
    for agent_id in agent_ids(inputs.config):
        try:
            agent = resolve_agent(inputs.config, agent_id, env=inputs.env)
        except ConfigError:
            continue
        settings = SandboxSettings.from_config(agent.sandbox)
        if settings.mode == "off" and security == "full" and _exec_available(inputs, agent.tools):
            found.append(
                Finding(
                    id="exec.unsandboxed",
                    severity="high" if _exposed(inputs) else "medium",
                    title=f"agent {agent_id!r}: exec runs unsandboxed in every session",
                    detail="sessions other than agent:"
                    f"{agent_id}:main (API clients, channels) get a shell as this user.",
                    fix='set agents.defaults.sandbox.mode to "non-main" (or this agent\'s '
                    "sandbox.mode), or deny exec with tools.deny",
                )
            )
        elif settings.mode != "off":
            if settings.network and auth_none(inputs):
                found.append(_network_reaches_gateway(agent_id))
            if settings not in failures:
                failures[settings] = check_sandbox(settings)
            reason = failures[settings]
            if reason is not None:
                found.append(
                    Finding(
                        id="sandbox.unavailable",
                        severity="medium",
                        title=f"agent {agent_id!r}: the sandbox is on but cannot start",
                        detail=f"{reason}; sandboxed sessions cannot run exec at all.",
                        fix="apt-get install bubblewrap, and allow unprivileged user "
                        "namespaces (sysctl kernel.unprivileged_userns_clone=1)",
                    )
                )
    return found


def _network_reaches_gateway(agent_id: str) -> Finding:
    return Finding(
        id="sandbox.network-reaches-gateway",
        severity="high",
        title=f"agent {agent_id!r}: sandboxed commands have the network and the gateway no token",
        detail="sandbox.network shares this machine's network, loopback included: a sandboxed "
        "command can call the gateway's API as the owner, whose sessions are not sandboxed.",
        fix='remove gateway.auth.mode "none" (the gateway then requires a token: '
        f"gateway.auth.token, {TOKEN_ENV} or its own), or remove sandbox.network",
    )


def _channels(inputs: AuditInputs) -> dict[str, dict[str, Any]]:
    """Configured, enabled channels (`channels.<id>`, camelCase keys), each with the keys it
    inherits from `channels.defaults` filled in."""
    raw = getattr(inputs.config, "channels", None)
    data = msgspec.to_builtins(raw) if raw is not None else None
    if not isinstance(data, dict):
        return {}
    defaults = data.get("defaults") or {}
    return {
        name: {**defaults, **section}
        for name, section in data.items()
        if name != "defaults" and isinstance(section, dict) and section.get("enabled", True)
    }


def check_channels(inputs: AuditInputs) -> list[Finding]:
    """Channels open to anyone, and channel DMs that land in the unsandboxed main session."""
    found: list[Finding] = []
    channels = _channels(inputs)
    for name, channel in channels.items():
        if channel.get("dmPolicy") == "open":
            found.append(
                Finding(
                    id="channels.open-dm",
                    severity="high",
                    title=f"channel {name!r} accepts direct messages from anyone",
                    detail="any stranger can talk to the agent and reach its tools.",
                    fix=f'set channels.{name}.dmPolicy to "pairing" or "allowlist"',
                )
            )
        if channel.get("groupPolicy") == "open":
            found.append(
                Finding(
                    id="channels.open-groups",
                    severity="medium",
                    title=f"channel {name!r} answers in any group it is added to",
                    detail="members of any group can talk to the agent and reach its tools.",
                    fix=f'set channels.{name}.groupPolicy to "allowlist" and list the groups',
                )
            )
    session = getattr(inputs.config, "session", None)
    dm_scope = getattr(session, "dm_scope", None) or "main"
    if channels and dm_scope == "main":
        for agent_id in agent_ids(inputs.config):
            try:
                agent = resolve_agent(inputs.config, agent_id, env=inputs.env)
            except ConfigError:
                continue
            if SandboxSettings.from_config(agent.sandbox).mode == "non-main":
                found.append(
                    Finding(
                        id="channels.dm-in-main-session",
                        severity="medium",
                        title=f"agent {agent_id!r}: channel DMs run in its unsandboxed main "
                        "session",
                        detail='with session.dmScope "main" (the default) the owner\'s DMs '
                        "(ownerIds) continue agent:" + agent_id + ":main, which sandbox.mode "
                        "non-main leaves unsandboxed: whoever holds the owner's chat account "
                        "gets the owner's shell.",
                        fix='set session.dmScope to "per-peer", or sandbox.mode to "all"',
                    )
                )
    return found


def check_web_fetch(inputs: AuditInputs) -> list[Finding]:
    """Sandboxed sessions allowed to fetch local and private addresses."""
    fetch = inputs.config.tools.web_fetch
    if fetch is None or not fetch.allow_private_network:
        return []
    return [
        Finding(
            id="webFetch.private-network",
            severity="low",
            title="web_fetch may reach loopback and private addresses in sandboxed sessions",
            detail="a fetched page can steer the model to local services (the gateway, routers).",
            fix="remove tools.webFetch.allowPrivateNetwork unless you need it",
        )
    ]


CHECKS: tuple[Check, ...] = (
    check_gateway,
    check_state_permissions,
    check_plugin_paths,
    check_exec_sandbox,
    check_channels,
    check_channel_identity,
    check_phone_channels,
    check_web_fetch,
    check_browser,
    check_web_search,
    check_workspace_access,
    check_mcp_in_workspace,
    check_allowlist_breadth,
    *SHARING_CHECKS,
)
