"""The audit checks on what other senders can write in a workspace: an agent that lets them
write the files its owner's turns read as instructions (`sandbox.workspaceAccess`,
`nodmix.security.workspace_guard`), and an MCP server started from a workspace, whose code
they could replace."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from nodmix.agents import AgentProfile, agent_ids, channels_configured, resolve_agent
from nodmix.config.schema import MCPServerConfig
from nodmix.errors import ConfigError
from nodmix.security.findings import AuditInputs, Finding


def _agents(inputs: AuditInputs) -> Iterator[tuple[str, AgentProfile]]:
    """Every agent that resolves (one that does not is another check's finding)."""
    for agent_id in agent_ids(inputs.config):
        try:
            yield agent_id, resolve_agent(inputs.config, agent_id, env=inputs.env)
        except ConfigError:
            continue


def check_workspace_access(inputs: AuditInputs) -> list[Finding]:
    """`workspaceAccess: rw` on an agent that chat channels or automation can reach."""
    found: list[Finding] = []
    for agent_id, agent in _agents(inputs):
        if agent.sandbox.workspace_access != "rw":
            continue
        found.append(
            Finding(
                id="workspace.instructions-writable",
                severity="high" if channels_configured(inputs.config) else "medium",
                title=f"agent {agent_id!r}: other senders may write the owner's instructions",
                detail="sandbox.workspaceAccess is rw: group chats, per-peer DMs and automation "
                "runs can write MEMORY.md, HEARTBEAT.md, memory/ and skills/, which the owner's "
                "own turns read into their prompt.",
                fix='remove sandbox.workspaceAccess (default "protected") unless every sender '
                "of this agent is trusted",
            )
        )
    return found


def _server_paths(server: MCPServerConfig) -> list[Path]:
    """The working directory, command and arguments of a stdio server that name paths
    (relative ones from its `cwd`), absolute."""
    cwd = Path(server.cwd).expanduser() if server.cwd else None
    found = [] if cwd is None else [cwd]
    for text in [server.command or "", *server.args]:
        if "/" not in text or text.startswith("-"):
            continue  # a name looked up on PATH, a word or an option
        path = Path(text).expanduser()
        if not path.is_absolute():
            if cwd is None:
                continue  # relative to wherever the gateway was started
            path = cwd / path
        found.append(path)
    return [Path(os.path.abspath(p)) for p in found]


def check_mcp_in_workspace(inputs: AuditInputs) -> list[Finding]:
    """A stdio MCP server whose working directory, command or script lies in an agent
    workspace: chats and automation runs may write ordinary workspace files, so they could
    change what the server runs, with the owner's rights, at its next start."""
    roots = [Path(os.path.abspath(agent.workspace.expanduser())) for _, agent in _agents(inputs)]
    found: list[Finding] = []
    for name, server in inputs.config.mcp.servers.items():
        if not server.enabled or server.command is None:
            continue
        inside = [p for p in _server_paths(server) if any(p.is_relative_to(r) for r in roots)]
        if not inside:
            continue
        found.append(
            Finding(
                id="mcp.server-in-workspace",
                severity="high" if channels_configured(inputs.config) else "medium",
                title=f"mcp.servers.{name} runs from an agent workspace ({inside[0]})",
                detail="group chats, per-peer DMs and automation runs may write ordinary "
                "workspace files; what they put there (the script, or a module or package the "
                "server loads from its working directory) runs with your rights when the "
                "server next starts. A server given the workspace to work on (a file server) "
                "writes there for every sender, past the workspace guard.",
                fix=f"move mcp.servers.{name}'s files and cwd out of the agent workspace",
            )
        )
    return found
