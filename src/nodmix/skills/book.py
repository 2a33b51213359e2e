"""The skills an agent is offered: locations from config, one scan, gating, the allowlist.

`SkillBook` is what the runtime, the CLI and the gateway share. It owns a `SkillScanner` (so a
long-lived process re-reads only what changed) and answers "which skills does this agent get,
and why not the others" in one call, `review`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from nodmix.config.schema import NodmixConfig
from nodmix.skills.cache import FrontMatterCache, cache_path
from nodmix.skills.discovery import SkillLocation, SkillScanner
from nodmix.skills.gating import Gate, GateInputs
from nodmix.skills.model import Skill, SkillStatus

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
WORKSPACE_SKILLS = "skills"


def managed_dir(state_dir: Path) -> Path:
    """`<state dir>/skills`: where `nodmix skills install` puts skills (`~/.nodmix/skills`)."""
    return state_dir / "skills"


class SkillReview(msgspec.Struct, frozen=True, kw_only=True):
    """Every skill found for an agent, with its verdict, and the files that were skipped."""

    statuses: tuple[SkillStatus, ...]
    problems: tuple[str, ...]

    @property
    def eligible(self) -> tuple[Skill, ...]:
        """The skills the agent is offered, by name."""
        return tuple(s.skill for s in self.statuses if s.eligible)

    def find(self, name: str) -> SkillStatus | None:
        """The status of the skill called `name`, if one was found."""
        return next((s for s in self.statuses if s.skill.name == name), None)


class SkillBook:
    """Skill locations and verdicts for one Nodmix state directory."""

    def __init__(
        self,
        *,
        state_dir: Path,
        bundled_dir: Path = BUNDLED_DIR,
        scanner: SkillScanner | None = None,
    ) -> None:
        """Create the book; `bundled_dir` is the skills shipped with Nodmix. The default
        scanner keeps parsed front matter in `<state dir>/cache/` for later processes."""
        self.state_dir = state_dir
        self.bundled_dir = bundled_dir
        self.scanner = scanner or SkillScanner(cache=FrontMatterCache(cache_path(state_dir)))
        self.last_scan_seconds = 1.0
        """How long the last per-turn scan took (the runtime decides from it whether the next
        one may run on the event loop); the first scan is never assumed cheap."""

    def locations(
        self, config: NodmixConfig, *, workspace: Path, config_dir: Path
    ) -> list[SkillLocation]:
        """Where skills are looked for, in override order (later wins by name)."""
        out = [
            SkillLocation(self.bundled_dir, "bundled"),
            SkillLocation(managed_dir(self.state_dir), "managed"),
            SkillLocation(workspace.absolute() / WORKSPACE_SKILLS, "workspace"),
        ]
        for text in config.skills.load.extra_dirs:
            folder = Path(text).expanduser()
            out.append(SkillLocation((config_dir / folder).absolute(), "extra"))
        return out

    def review(
        self,
        config: NodmixConfig,
        *,
        raw_config: Mapping[str, Any],
        config_dir: Path,
        agent_id: str,
        workspace: Path,
        env: Mapping[str, str],
    ) -> SkillReview:
        """Scan (cheap when nothing changed) and judge every skill for `agent_id`."""
        discovery = self.scanner.scan(
            self.locations(config, workspace=workspace, config_dir=config_dir)
        )
        gate = Gate(
            GateInputs(
                env=env,
                raw_config=raw_config,
                entries=config.skills.entries,
                tool_allowed=_tool_policy(config, agent_id),
            )
        )
        allowlist = _allowlist(config, agent_id)
        statuses: list[SkillStatus] = []
        for name, skill in discovery.skills.items():
            reasons = gate.reasons(skill)
            if allowlist is not None and name not in allowlist:
                reasons = (*reasons, f"not in the skills allowlist of agent {agent_id!r}")
            statuses.append(
                SkillStatus(
                    skill=skill,
                    eligible=not reasons,
                    reasons=reasons,
                    overrides=discovery.overridden.get(name, ()),
                )
            )
        return SkillReview(statuses=tuple(statuses), problems=discovery.problems)


def _tool_policy(config: NodmixConfig, agent_id: str) -> Callable[[str], bool]:
    """Whether the agent's tool policy (`tools.allow`/`deny`, then the agent's own) allows a
    built-in tool of that name, such as `cron`."""
    from nodmix.tools.base import FunctionTool, ToolResult
    from nodmix.tools.policy import ToolPolicy

    entry = next((a for a in config.agents.entries if a.id == agent_id), None)
    policy = ToolPolicy.from_config(config.tools).merged(entry.tools if entry else None)

    async def never(args: object, ctx: object) -> ToolResult:
        raise NotImplementedError  # only its name and origin are matched, never called

    def allowed(name: str) -> bool:
        return policy.allows(FunctionTool.create(never, name=name, description=name))

    return allowed


def _allowlist(config: NodmixConfig, agent_id: str) -> Sequence[str] | None:
    entry = next((a for a in config.agents.entries if a.id == agent_id), None)
    return entry.skills if entry is not None else None
