"""An agent's subagent settings: `agents.defaults.subagents` with the agent's own keys over it.

The requester's agent decides whether, how much and as whom it may delegate (`enabled`,
`maxConcurrent`, `maxDepth`, `maxChildrenPerTurn`, `allowAgents`); the agent a subagent runs
as decides how that run goes (`model`, `timeoutSeconds`, `tools`, `archiveAfterMinutes`).
"""

from __future__ import annotations

import msgspec

from nodmix.config.schema import NodmixConfig
from nodmix.config.subagents_schema import SubagentsConfig, SubagentToolsConfig
from nodmix.tools.policy import ToolPolicy

DEFAULT_MAX_CONCURRENT = 8
DEFAULT_MAX_DEPTH = 1
DEFAULT_MAX_CHILDREN_PER_TURN = 32
DEFAULT_ARCHIVE_AFTER_MINUTES = 60


class SubagentSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Resolved `subagents` settings of one agent."""

    enabled: bool = True
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    max_depth: int = DEFAULT_MAX_DEPTH
    max_children_per_turn: int = DEFAULT_MAX_CHILDREN_PER_TURN
    model: str | None = None
    timeout_seconds: int | None = None
    """None: the agent's turn timeout."""
    policy: ToolPolicy = ToolPolicy()
    """The tool policy of this agent's subagent turns (over the agent's own)."""
    archive_after_minutes: int = DEFAULT_ARCHIVE_AFTER_MINUTES
    allow_agents: tuple[str, ...] = ()
    """Other agents this agent's turns may start turns as (`*`: any)."""

    def may_reach(self, own_id: str, target_id: str) -> bool:
        """Whether a turn of agent `own_id` may start a turn as agent `target_id`."""
        return target_id == own_id or "*" in self.allow_agents or target_id in self.allow_agents


def subagent_settings(config: NodmixConfig, agent_id: str) -> SubagentSettings:
    """The settings of `agent_id` (an unknown id gets the defaults' settings)."""
    base = config.agents.defaults.subagents or SubagentsConfig()
    entry = next((a for a in config.agents.entries if a.id == agent_id), None)
    own = (entry.subagents if entry is not None else None) or SubagentsConfig()

    def pick(name: str) -> object:
        value = getattr(own, name)
        return getattr(base, name) if value is None else value

    tools = _merge_tools(base.tools, own.tools)
    enabled = pick("enabled")
    return SubagentSettings(
        enabled=enabled is not False,
        max_concurrent=_int(pick("max_concurrent"), DEFAULT_MAX_CONCURRENT),
        max_depth=_int(pick("max_depth"), DEFAULT_MAX_DEPTH),
        max_children_per_turn=_int(pick("max_children_per_turn"), DEFAULT_MAX_CHILDREN_PER_TURN),
        model=_str(pick("model")),
        timeout_seconds=_int(pick("timeout_seconds"), 0) or None,
        policy=ToolPolicy(
            allow=None if tools.allow is None else tuple(tools.allow), deny=tuple(tools.deny)
        ),
        archive_after_minutes=_int(pick("archive_after_minutes"), DEFAULT_ARCHIVE_AFTER_MINUTES),
        allow_agents=tuple(_strings(pick("allow_agents"))),
    )


def _merge_tools(
    base: SubagentToolsConfig | None, own: SubagentToolsConfig | None
) -> SubagentToolsConfig:
    base, own = base or SubagentToolsConfig(), own or SubagentToolsConfig()
    deny = [*base.deny, *(e for e in own.deny if e not in base.deny)]
    return SubagentToolsConfig(allow=own.allow if own.allow is not None else base.allow, deny=deny)


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
