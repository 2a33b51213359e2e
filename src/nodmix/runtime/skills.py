"""What skills add to one turn: the prompt section, the code-mode tools, readable folders."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from nodmix.agents import AgentProfile
from nodmix.config import LoadedConfig
from nodmix.skills import SkillBook, SkillReview, skills_section
from nodmix.skills.gating import skill_env
from nodmix.skills.model import Skill
from nodmix.skills.tools import SKILLS_OWNER, skill_tools, skills_namespace
from nodmix.tools import Tool

if TYPE_CHECKING:
    from nodmix.codemode.namespaces import NamespaceRegistration


@functools.cache
def skills_namespace_entry() -> tuple[str, NamespaceRegistration]:
    """`(owner, registration)` of the code-mode `skills` global, passed with the plugins' ones
    (built on first use: only code-mode runs need the namespace machinery)."""
    return (SKILLS_OWNER, skills_namespace())


class TurnSkills(msgspec.Struct, frozen=True, kw_only=True):
    """The eligible skills of a turn and what they contribute."""

    skills: tuple[Skill, ...]
    exec_env: dict[str, str] = msgspec.field(default_factory=dict)
    """What the skills' `skills.entries` settings add to `exec` commands."""

    @property
    def read_roots(self) -> tuple[Path, ...]:
        """Skill folders the `read` tool may read although they lie outside the workspace."""
        return tuple(s.folder for s in self.skills)

    def code_mode_tools(self) -> list[Tool]:
        """`skills_list` and `skill_read` for the hidden catalog (none without skills)."""
        return skill_tools(self.skills) if self.skills else []

    def prompt(self, agent: AgentProfile, *, code_mode: bool) -> str | None:
        """The system-prompt section (one line per skill), or None."""
        return skills_section(
            self.skills, workspace=agent.workspace.absolute(), code_mode=code_mode
        )


INLINE_SCAN_SECONDS = 0.001
"""A skill scan that took less than this runs on the event loop next turn: a thread hop
costs more than checking a few unchanged folders."""


async def scan_for_turn(
    book: SkillBook,
    loaded: LoadedConfig,
    agent: AgentProfile,
    env: Mapping[str, Any],
    *,
    inline: bool = False,
) -> TurnSkills:
    """`turn_skills`, in a worker thread only when the last scan was slow (many skills, a
    changed SKILL.md to parse) and other work may be waiting on the loop (not `inline`).

    The time kept is the scan's own, also in the thread: counting the thread hop would keep
    every later scan in a thread on a loaded machine, where the hop alone passes the limit.
    """

    def timed() -> TurnSkills:
        started = time.perf_counter()
        result = turn_skills(book, loaded, agent, env)
        book.last_scan_seconds = time.perf_counter() - started
        return result

    if inline or book.last_scan_seconds < INLINE_SCAN_SECONDS:
        return timed()
    return await anyio.to_thread.run_sync(timed)


def turn_skills(
    book: SkillBook, loaded: LoadedConfig, agent: AgentProfile, env: Mapping[str, Any]
) -> TurnSkills:
    """Scan (cheap when nothing changed) and keep the skills `agent` is offered."""
    offered = review_agent(book, loaded, agent, env).eligible
    entries = loaded.config.skills.entries
    return TurnSkills(skills=offered, exec_env=skill_env(offered, entries, env))


def review_agent(
    book: SkillBook, loaded: LoadedConfig, agent: AgentProfile, env: Mapping[str, Any]
) -> SkillReview:
    """Every skill found for `agent` with its verdict (for the gateway's `skills.list`)."""
    return book.review(
        loaded.config,
        raw_config=loaded.raw,
        config_dir=loaded.path.parent,
        agent_id=agent.id,
        workspace=agent.workspace,
        env=env,
    )
