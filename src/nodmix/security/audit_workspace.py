"""The audit check on `sandbox.workspaceAccess`: an agent that lets other senders write the
files its owner's turns read as instructions (`nodmix.security.workspace_guard`)."""

from __future__ import annotations

from nodmix.agents import agent_ids, channels_configured, resolve_agent
from nodmix.errors import ConfigError
from nodmix.security.audit import AuditInputs, Finding


def check_workspace_access(inputs: AuditInputs) -> list[Finding]:
    """`workspaceAccess: rw` on an agent that chat channels or automation can reach."""
    found: list[Finding] = []
    for agent_id in agent_ids(inputs.config):
        try:
            agent = resolve_agent(inputs.config, agent_id, env=inputs.env)
        except ConfigError:
            continue
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
