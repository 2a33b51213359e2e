"""Skills inside code mode: the `skills` namespace (`skills.list()`, `skills.read(name)`).

The namespace is backed by two catalog tools owned by `skills`, `skills_list` and `skill_read`,
built per run from the skills the agent is offered. They join the hidden code-mode catalog only
(plain runs list skills in the system prompt and read them with `read`), so the `exec`
description never carries the list itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from nodmix.messages import JsonObject
from nodmix.skills.frontmatter import SkillFormatError, read_body
from nodmix.skills.model import Skill
from nodmix.tools.base import Tool, ToolContext, ToolOrigin, ToolResult, ToolSpec

if TYPE_CHECKING:
    from nodmix.codemode.namespaces import NamespaceContext, NamespaceRegistration

SKILLS_OWNER = "skills"
LIST_TOOL = "skills_list"
READ_TOOL = "skill_read"
MAX_BODY_CHARS = 64 * 1024


class _SkillTool:
    def __init__(self, spec: ToolSpec, skills: Sequence[Skill]) -> None:
        self._spec = spec
        self._skills = {s.name: s for s in skills}

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    @property
    def origin(self) -> ToolOrigin:
        return ToolOrigin(source="nodmix", owner=SKILLS_OWNER, name=self._spec.name)


class SkillsListTool(_SkillTool):
    """Lists the skills this run is offered."""

    def __init__(self, skills: Sequence[Skill]) -> None:
        """Create the tool for the run's eligible `skills`."""
        super().__init__(
            ToolSpec(
                name=LIST_TOOL,
                label="List skills",
                description="List the skills (procedures in SKILL.md files) you can use.",
                parameters={"type": "object", "properties": {}, "additionalProperties": False},
            ),
            skills,
        )

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Name, description and `SKILL.md` path of each skill."""
        rows = [
            {"name": s.name, "description": s.description, "path": str(s.file)}
            for s in self._skills.values()
        ]
        text = "\n".join(f"- {r['name']}: {r['description']} ({r['path']})" for r in rows)
        return ToolResult.text(text or "(no skills)", details=rows)


class SkillReadTool(_SkillTool):
    """Returns the instructions of one skill."""

    def __init__(self, skills: Sequence[Skill]) -> None:
        """Create the tool for the run's eligible `skills`."""
        super().__init__(
            ToolSpec(
                name=READ_TOOL,
                label="Read skill",
                description="Read the instructions (SKILL.md body) of a skill by name.",
                parameters={
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "Skill name."}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
            ),
            skills,
        )

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """The skill's body, its folder and its `SKILL.md` path."""
        name = args.get("name")
        skill = self._skills.get(name) if isinstance(name, str) else None
        if skill is None:
            known = ", ".join(self._skills) or "none"
            return ToolResult.error(f"no skill named {name!r} is available (available: {known})")
        try:
            body = await anyio.to_thread.run_sync(read_body, skill.file)
        except (OSError, UnicodeDecodeError, SkillFormatError) as exc:
            return ToolResult.error(f"cannot read skill {skill.name!r} ({skill.file}): {exc}")
        if len(body) > MAX_BODY_CHARS:
            body = body[:MAX_BODY_CHARS] + "\n[... truncated]"
        details = {
            "name": skill.name,
            "path": str(skill.file),
            "folder": str(skill.folder),
            "content": body,
        }
        return ToolResult.text(body, details=details)


def skill_tools(skills: Sequence[Skill]) -> list[Tool]:
    """The code-mode catalog tools for a run's eligible skills."""
    return [SkillsListTool(skills), SkillReadTool(skills)]


def skills_namespace() -> NamespaceRegistration:
    """The `skills` global of code-mode programs, backed by the two tools above."""
    from nodmix.codemode.namespaces import NamespaceRegistration, namespace_tool

    def scope(ctx: NamespaceContext) -> Mapping[str, Any]:
        return {
            "list": namespace_tool(LIST_TOOL, lambda a: {}),
            "read": namespace_tool(READ_TOOL, lambda a: {"name": a[0] if a else None}),
        }

    return NamespaceRegistration(
        id="skills",
        global_name="skills",
        required_tool_names=[LIST_TOOL, READ_TOOL],
        create_scope=scope,
        description=(
            "`await skills.list()` → [{name, description, path}] of the skills you may use; "
            "`await skills.read(name)` → {name, path, folder, content} (the SKILL.md body)."
        ),
    )
