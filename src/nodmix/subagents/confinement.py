"""A subagent, or a turn another session's turn starts with `sessions_send`, is never less
confined than the turn that asked for it: when the asking turn runs its commands in the
sandbox, the turn it starts must too. Otherwise a page or message steering a sandboxed turn
would reach the host's shell through another agent, or through the owner's main session."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodmix.errors import ToolError
from nodmix.origin import TurnOrigin
from nodmix.subagents.lineage import child_origin
from nodmix.tools.base import ToolContext

if TYPE_CHECKING:
    from nodmix.agents import AgentProfile


def _sandboxed(agent: AgentProfile, session_key: str, origin: TurnOrigin | None) -> bool:
    mode = agent.sandbox.mode or "off"
    if mode == "off":
        return False
    from nodmix.security.sandbox.policy import is_sandboxed  # only for a sandboxed agent

    return is_sandboxed(mode, agent.id, session_key, origin)


def check_confinement(
    mine: AgentProfile, ctx: ToolContext, target: AgentProfile, target_key: str, what: str
) -> None:
    """Refuse when `ctx`'s turn (of agent `mine`) runs commands in the sandbox and the turn it
    would start in `target_key` (of agent `target`, speaking as `ctx` does) would not.

    Raises:
        ToolError: one line naming both and the way out (`what`: the refused action).
    """
    if not _sandboxed(mine, ctx.session_key, ctx.origin):
        return
    if _sandboxed(target, target_key, child_origin(ctx.origin, ctx.session_key)):
        return
    raise ToolError(
        f"{what}: {target_key} runs its commands outside the sandbox and this turn runs them "
        "inside it; a turn started from here may not be less confined than this one (give "
        f"agent {target.id!r} a sandbox, agents.list[].sandbox.mode, or work here)"
    )
