"""Agent profiles: what one agent is, resolved from config (defaults merged with its entry)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import msgspec

from nodmix.config import paths
from nodmix.config.schema import (
    AgentConfig,
    AgentToolsConfig,
    CodeModeConfig,
    CompactionConfig,
    ModelTimeouts,
    NodmixConfig,
    SandboxConfig,
)
from nodmix.errors import ConfigError

DEFAULT_MAX_STEPS = 40
DEFAULT_TIMEOUT_SECONDS = 600
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20


class AgentProfile(msgspec.Struct, frozen=True, kw_only=True):
    """A resolved agent."""

    id: str
    name: str
    model: str | None
    """Primary `provider/model`, or None to pick a default from the environment."""
    fallbacks: tuple[str, ...]
    workspace: Path
    tools: AgentToolsConfig | None
    code_mode: bool | CodeModeConfig | None
    """`tools.codeMode` with the agent's own setting shallow-merged over it."""
    compaction: CompactionConfig
    instructions: str | None
    sandbox: SandboxConfig = SandboxConfig()
    """`agents.defaults.sandbox` with the agent's own keys merged over it."""
    max_steps: int = DEFAULT_MAX_STEPS
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    """Seconds a whole turn may take."""
    extra: dict[str, object] = msgspec.field(default_factory=dict)
    max_tokens: int | None = None
    """Output token limit of each model request; `None`: the model's own `maxTokens`."""
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """Cap on one reply's text, reasoning and tool-argument bytes."""
    model_timeouts: ModelTimeouts | None = None
    """The agent's connect and idle waits, over the providers' own."""


def agent_ids(config: NodmixConfig) -> list[str]:
    """Configured agent ids; `main` always exists."""
    ids = [a.id for a in config.agents.entries]
    return ids if paths.DEFAULT_AGENT_ID in ids else [paths.DEFAULT_AGENT_ID, *ids]


def resolve_agent(
    config: NodmixConfig, agent_id: str, *, env: Mapping[str, str] | None = None
) -> AgentProfile:
    """Merge `agents.defaults` with `agents.list[id=agent_id]`."""
    entry = next((a for a in config.agents.entries if a.id == agent_id), None)
    if entry is None and agent_id != paths.DEFAULT_AGENT_ID:
        known = ", ".join(agent_ids(config))
        raise ConfigError(f"unknown agent {agent_id!r} (configured: {known})", key="agents.list")
    entry = entry or AgentConfig(id=agent_id)
    defaults = config.agents.defaults
    state = paths.state_dir(env)
    primary, fallbacks = defaults.model.primary, tuple(defaults.model.fallbacks)
    if isinstance(entry.model, str):
        primary = entry.model
    elif entry.model is not None:
        primary = entry.model.primary or primary
        fallbacks = tuple(entry.model.fallbacks) or fallbacks
    workspace_text = entry.workspace or defaults.workspace
    workspace = (
        Path(workspace_text).expanduser() if workspace_text else paths.default_workspace(state)
    )
    if entry.workspace is None and defaults.workspace is None and agent_id != "main":
        workspace = state / "workspaces" / agent_id
    instructions = "\n\n".join(t for t in (defaults.instructions, entry.instructions) if t) or None
    return AgentProfile(
        id=agent_id,
        name=entry.name or agent_id,
        model=primary,
        fallbacks=fallbacks,
        workspace=workspace,
        tools=entry.tools,
        code_mode=_merge_code_mode(config.tools.code_mode, entry.tools),
        compaction=_merge_struct(defaults.compaction, entry.compaction) or CompactionConfig(),
        instructions=instructions,
        sandbox=_sandbox(config, _merge_struct(defaults.sandbox, entry.sandbox)),
        max_steps=defaults.max_steps or DEFAULT_MAX_STEPS,
        timeout_seconds=(
            entry.timeout_seconds or defaults.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
        ),
        max_tokens=entry.max_tokens or defaults.max_tokens,
        max_output_bytes=(
            entry.max_output_bytes or defaults.max_output_bytes or DEFAULT_MAX_OUTPUT_BYTES
        ),
        model_timeouts=entry.model_timeouts,
    )


def _sandbox(config: NodmixConfig, merged: SandboxConfig | None) -> SandboxConfig:
    """The agent's sandbox settings; an unset `mode` becomes `non-main` once a chat channel is
    configured (people other than the owner can then start sessions), else stays unset (off)."""
    sandbox = merged or SandboxConfig()
    if sandbox.mode is None and channels_configured(config):
        return msgspec.structs.replace(sandbox, mode="non-main")
    return sandbox


def channels_configured(config: NodmixConfig) -> bool:
    """Whether any chat channel section exists and is not `enabled: false`."""
    channels = config.channels
    for name in channels.__struct_fields__:
        section = getattr(channels, name)
        if name == "defaults" or section is None:
            continue
        if getattr(section, "enabled", None) is not False:
            return True
    return False


def _merge_code_mode(
    global_value: bool | CodeModeConfig | None, agent_tools: AgentToolsConfig | None
) -> bool | CodeModeConfig | None:
    """Shallow-merge the agent's `tools.codeMode` over the global one (agent keys win)."""
    agent_value = agent_tools.code_mode if agent_tools else None
    if agent_value is None:
        return global_value
    if global_value is None:
        return agent_value
    base = CodeModeConfig(enabled=global_value) if isinstance(global_value, bool) else global_value
    over = CodeModeConfig(enabled=agent_value) if isinstance(agent_value, bool) else agent_value
    return _merge_struct(base, over)


_S = TypeVar("_S", bound=msgspec.Struct)


def _merge_struct(base: _S | None, over: _S | None) -> _S | None:
    """Fields set on `over` (not None) replace those of `base`; nested structs merge too."""
    if over is None:
        return base
    if base is None:
        return over
    changes = {}
    for name in base.__struct_fields__:
        value = getattr(over, name)
        if value is None:
            continue
        current = getattr(base, name)
        if isinstance(value, msgspec.Struct) and isinstance(current, msgspec.Struct):
            value = _merge_struct(current, value)
        changes[name] = value
    return msgspec.structs.replace(base, **changes)
