"""What a skill is once its folder has been read: name, description, where, and what it needs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

SkillSource = Literal["bundled", "managed", "workspace", "extra"]
"""Where a skill was found: shipped with Nodmix, `<state dir>/skills`, `<workspace>/skills`, or
one of `skills.load.extraDirs`. Later sources override earlier ones by name."""

SKILL_FILE = "SKILL.md"


class Requirements(msgspec.Struct, frozen=True, kw_only=True):
    """`metadata.nodmix.requires` plus `metadata.nodmix.os`: what must hold to offer a skill."""

    bins: tuple[str, ...] = ()
    """Every one of these programs must be on `PATH`."""
    any_bins: tuple[str, ...] = ()
    """At least one of these programs must be on `PATH`."""
    env: tuple[str, ...] = ()
    """Environment variables that must be set (or given in `skills.entries.<name>.env`)."""
    config: tuple[str, ...] = ()
    """Dotted `nodmix.json` keys that must be set to a true value."""
    os: tuple[str, ...] = ()
    """Operating systems the skill works on (`linux`, `darwin`, `win32`); empty means any."""
    tools: tuple[str, ...] = ()
    """Tools (by the name the model sees, e.g. `cron`) the agent's tool policy must allow."""


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    """One skill folder."""

    name: str
    description: str
    folder: Path
    """The folder holding `SKILL.md` (absolute)."""
    source: SkillSource
    requires: Requirements = Requirements()
    primary_env: str | None = None
    """The variable `skills.entries.<name>.apiKey` stands for (`metadata.nodmix.primaryEnv`)."""

    @property
    def file(self) -> Path:
        """The skill's `SKILL.md`."""
        return self.folder / SKILL_FILE


class SkillStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A skill and whether this agent is offered it; `reasons` say why not."""

    skill: Skill
    eligible: bool
    reasons: tuple[str, ...] = ()
    overrides: tuple[Path, ...] = ()
    """Folders of same-named skills this one replaced (earlier locations)."""

    def to_json(self) -> dict[str, object]:
        """The JSON shape shared by `nodmix skills list --json` and the gateway's RPC."""
        skill = self.skill
        req = skill.requires
        return {
            "name": skill.name,
            "description": skill.description,
            "source": skill.source,
            "path": str(skill.file),
            "eligible": self.eligible,
            "reasons": list(self.reasons),
            "requires": {
                "bins": list(req.bins),
                "anyBins": list(req.any_bins),
                "env": list(req.env),
                "config": list(req.config),
                "os": list(req.os),
                "tools": list(req.tools),
            },
            "overrides": [str(p) for p in self.overrides],
        }
