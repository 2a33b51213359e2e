"""What a `sessions_spawn` call asks for, and the run it would start after every limit and rule
is checked (`plan_run`); nothing changes until the service starts it. Past a limit the call
fails with one line naming it (`SpawnRefused`)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from nodmix.errors import NodmixError, ToolError
from nodmix.origin import is_owner_turn
from nodmix.subagents.confinement import check_confinement
from nodmix.subagents.host import SubagentHost
from nodmix.subagents.records import SubagentRun, child_key_for, new_run_id
from nodmix.subagents.settings import SubagentSettings
from nodmix.tools.base import ToolContext

MAX_OPEN_RUNS = 512
"""Subagent runs queued or running in one process at most, whatever the limits per agent."""
MAX_TASK_CHARS = 100_000
MAX_LABEL_CHARS = 200


class SpawnRefused(ToolError):
    """A spawn past a limit or against a rule (one line naming it)."""


class SpawnRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The arguments of `sessions_spawn`."""

    task: str
    agent_id: str | None = None
    label: str | None = None
    model: str | None = None
    timeout_seconds: float | None = None
    wait: bool = False


def plan_run(
    host: SubagentHost,
    request: SpawnRequest,
    ctx: ToolContext,
    *,
    settings: Callable[[str], SubagentSettings],
    depth: int,
    spawned: int,
    open_runs: int,
) -> SubagentRun:
    """The run `request` would start from `ctx`'s turn: the child at `depth`, its turn having
    spawned `spawned` already and the process holding `open_runs` open runs.

    Raises:
        SpawnRefused: a limit or rule forbids it.
    """
    mine = settings(ctx.agent_id)
    if not mine.enabled:
        raise SpawnRefused(
            f"subagents are off for agent {ctx.agent_id!r} (subagents.enabled: false)"
        )
    task = request.task.strip()
    if not task:
        raise SpawnRefused("task is empty: say what the subagent should do")
    if len(task) > MAX_TASK_CHARS:
        raise SpawnRefused(f"task is longer than {MAX_TASK_CHARS} characters")
    if depth > mine.max_depth:
        raise SpawnRefused(
            f"maxDepth {mine.max_depth} reached: this session is a subagent "
            f"and may not spawn another (agents.defaults.subagents.maxDepth)"
        )
    if spawned >= mine.max_children_per_turn:
        raise SpawnRefused(
            f"maxChildrenPerTurn {mine.max_children_per_turn} reached: this turn has "
            f"spawned {spawned} subagents (agents.defaults.subagents.maxChildrenPerTurn)"
        )
    if open_runs >= MAX_OPEN_RUNS:
        raise SpawnRefused(
            f"{MAX_OPEN_RUNS} subagent runs are already open in this process; "
            "wait for some to finish"
        )
    target = request.agent_id or ctx.agent_id
    known = host.agent_ids()
    if target not in known:
        raise SpawnRefused(f"unknown agent {target!r} (agents: {', '.join(known)})")
    owner = is_owner_turn(ctx.origin, ctx.agent_id, ctx.session_key)
    if target != ctx.agent_id and not owner:
        raise SpawnRefused(
            "a conversation that does not speak for the owner spawns subagents of its "
            f"own agent only ({ctx.agent_id!r})"
        )
    if not mine.may_reach(ctx.agent_id, target):
        raise SpawnRefused(
            f"agent {ctx.agent_id!r} may not spawn subagents of agent {target!r}: add it to "
            f"agents.list[].subagents.allowAgents (or agents.defaults.subagents.allowAgents)"
        )
    if request.model and not owner:
        raise SpawnRefused(
            "a conversation that does not speak for the owner cannot choose a subagent's "
            "model; leave model out"
        )
    own = settings(target)
    agent = host.agent(target)
    if target != ctx.agent_id:
        try:
            check_confinement(
                host.agent(ctx.agent_id), ctx, agent, child_key_for(target, "0" * 16), "spawn"
            )
        except ToolError as exc:
            raise SpawnRefused(str(exc)) from None
    model = request.model or own.model
    try:
        host.model_refs(agent, model)
    except NodmixError as exc:
        raise SpawnRefused(f"model {model!r}: {exc}") from None
    cap = float(own.timeout_seconds or agent.timeout_seconds)
    timeout = min(request.timeout_seconds, cap) if request.timeout_seconds else cap
    run_id = new_run_id()
    return SubagentRun(
        run_id=run_id,
        child_key=child_key_for(target, run_id),
        parent_key=ctx.session_key,
        parent_run_id=ctx.run_id,
        depth=depth,
        task=task,
        label=(request.label or "").strip()[:MAX_LABEL_CHARS] or None,
        model=model,
        timeout_seconds=timeout,
        wait=request.wait,
        origin=ctx.origin,
    )
