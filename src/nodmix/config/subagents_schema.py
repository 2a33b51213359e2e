"""`agents.defaults.subagents` (and `agents.list[].subagents`): delegation to subagents.

An agent with subagents enabled (the default) is offered `sessions_spawn`, `sessions_send`,
`sessions_list`, `sessions_history` and `agents_list`. Unset keys take the defaults documented
on each field; an agent's own keys replace the defaults' one by one (`tools.deny` lists add up).
"""

from typing import Annotated

import msgspec

from nodmix.config.section import Section


class SubagentToolsConfig(Section, frozen=True):
    """`subagents.tools`: the tool policy of subagent turns, applied after the agent's own
    (`tools.allow`/`tools.deny` grammar: names, `group:<owner>`, catalog ids, `*` patterns)."""

    allow: list[str] | None = None
    """When set, subagents have only these of the agent's tools."""
    deny: list[str] = []
    """Tools subagents never have (added to the agent's own deny list)."""


class SubagentsConfig(Section, frozen=True):
    """`agents.defaults.subagents` (and per agent)."""

    enabled: bool | None = None
    """`false`: the agent gets none of the session tools. Default true."""
    max_concurrent: Annotated[int, msgspec.Meta(ge=1, le=256)] | None = None
    """Subagent turns of this agent's sessions running at once; more wait for a slot. 8."""
    max_depth: Annotated[int, msgspec.Meta(ge=1, le=8)] | None = None
    """How deep spawns may nest: 1 (default) lets a session spawn subagents that cannot spawn
    in turn; 2 lets those spawn once more."""
    max_children_per_turn: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    """Subagents one turn may spawn. 32."""
    model: str | None = None
    """`provider/model` subagents run on (the spawn call's `model` wins; default: the
    agent's own model)."""
    timeout_seconds: Annotated[int, msgspec.Meta(gt=0)] | None = None
    """How long one subagent run may take (the spawn call's `timeoutSeconds` may shorten it).
    Default: the agent's turn timeout."""
    tools: SubagentToolsConfig | None = None
    allow_agents: list[str] | None = None
    """Other agents this agent's turns may start turns as: subagents (`sessions_spawn
    agentId`) and messages into their sessions (`sessions_send`). `["*"]`: every agent.
    Default: none but the agent itself, so an agent whose tools are narrow cannot borrow a
    wider agent's."""
    archive_after_minutes: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """A finished subagent's session leaves the session list (its transcript moves to
    `sessions/archive/`) this long after its run ended; 0 keeps it. 60."""
