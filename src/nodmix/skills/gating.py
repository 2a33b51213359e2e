"""Gating: whether a skill's requirements hold here, and if not, why (one reason per line)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from nodmix.config.loader import resolve_secret
from nodmix.config.schema import SkillEntry
from nodmix.errors import ConfigError
from nodmix.skills.model import Skill


class GateInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What gating looks at; tests pass their own `which` and `platform`."""

    env: Mapping[str, str]
    raw_config: Mapping[str, Any]
    """The `nodmix.json` document as written (for `requires.config`)."""
    entries: Mapping[str, SkillEntry] = msgspec.field(default_factory=dict)
    platform: str = sys.platform
    which: Callable[[str], str | None] | None = None
    """Finds a program; default: `shutil.which` over `env["PATH"]`."""
    tool_allowed: Callable[[str], bool] | None = None
    """Whether the agent's tool policy lets it use a tool by name; `None`: not checked."""


class Gate:
    """Checks skills against one set of inputs; program lookups are shared across skills."""

    def __init__(self, inputs: GateInputs) -> None:
        """Create a gate for one scan."""
        self._inputs = inputs
        self._found: dict[str, bool] = {}

    def reasons(self, skill: Skill) -> tuple[str, ...]:
        """Why `skill` cannot be offered; empty when it can."""
        inputs = self._inputs
        entry = inputs.entries.get(skill.name)
        if entry is not None and entry.enabled is False:
            return (f"disabled by skills.entries.{skill.name}.enabled",)
        req = skill.requires
        out: list[str] = []
        if req.os and not any(inputs.platform.startswith(name) for name in req.os):
            out.append(f"works only on {', '.join(req.os)} (this is {inputs.platform})")
        out.extend(f"missing binary: {name}" for name in req.bins if not self._has(name))
        if req.any_bins and not any(self._has(name) for name in req.any_bins):
            out.append(f"missing binary: one of {', '.join(req.any_bins)}")
        out.extend(
            f"environment variable {name} is not set"
            for name in req.env
            if not self._env_set(skill, entry, name)
        )
        out.extend(f"config key {key} is not set" for key in req.config if not _truthy(inputs, key))
        allowed = inputs.tool_allowed
        if allowed is not None:
            out.extend(
                f"tool {name} is not available to this agent (tools.allow / tools.deny)"
                for name in req.tools
                if not allowed(name)
            )
        return tuple(out)

    def _has(self, program: str) -> bool:
        found = self._found.get(program)
        if found is None:
            which = self._inputs.which
            if which is None:
                found = shutil.which(program, path=self._inputs.env.get("PATH")) is not None
            else:
                found = which(program) is not None
            self._found[program] = found
        return found

    def _env_set(self, skill: Skill, entry: SkillEntry | None, name: str) -> bool:
        if self._inputs.env.get(name):
            return True
        if entry is None:
            return False
        if entry.env.get(name):
            return True
        if entry.api_key and skill.primary_env == name:
            try:
                key = f"skills.entries.{skill.name}.apiKey"
                return bool(resolve_secret(entry.api_key, key=key, env=self._inputs.env))
            except ConfigError:
                return False
        return False


def _truthy(inputs: GateInputs, dotted: str) -> bool:
    node: Any = inputs.raw_config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return bool(node)


def skill_env(
    skills: Sequence[Skill], entries: Mapping[str, SkillEntry], env: Mapping[str, str]
) -> dict[str, str]:
    """Variables the offered skills' entries add to commands: `env`, and `apiKey` as the skill's
    `primaryEnv`. A variable already set in the environment is left as it is."""
    out: dict[str, str] = {}
    for skill in skills:
        entry = entries.get(skill.name)
        if entry is None:
            continue
        values = dict(entry.env)
        if entry.api_key and skill.primary_env:
            try:
                key = f"skills.entries.{skill.name}.apiKey"
                secret = resolve_secret(entry.api_key, key=key, env=env)
            except ConfigError:
                secret = None
            if secret:
                values.setdefault(skill.primary_env, secret)
        for name, value in values.items():
            if not env.get(name):
                out.setdefault(name, value)
    return out
