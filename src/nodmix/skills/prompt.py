"""The system-prompt section listing skills: one compact line each, never the body.

The model reads a skill's `SKILL.md` with `read` only when it decides to use it (progressive
disclosure), so a hundred installed skills cost a few thousand tokens, not their full text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nodmix.skills.model import Skill

DESCRIPTION_CAP_CHARS = 80
"""Longer descriptions are cut at a word boundary; the full text is in the `SKILL.md`."""

HEADER = (
    "Skills (procedures for particular jobs): when one fits the task, first read its SKILL.md "
    "with `read`, then follow it. A skill listed under folder F is F/<name>/SKILL.md."
)
CODE_MODE_HINT = "In an `exec` program, `skills.list()` and `skills.read(name)` give the same."
_SOURCE_ORDER = {"bundled": 0, "managed": 1, "workspace": 2, "extra": 3}


def skills_section(
    skills: Sequence[Skill], *, workspace: Path, home: Path | None = None, code_mode: bool = False
) -> str | None:
    """The prompt section for the eligible `skills`, or None when there are none.

    Skills are grouped under the folder that holds them, so each line is just
    `- name: description` (the path is that folder plus the name); a skill whose folder is not
    named after it gives its own path.
    """
    if not skills:
        return None
    lines = [HEADER + (" " + CODE_MODE_HINT if code_mode else "")]
    group: Path | None = None
    ordered = sorted(skills, key=lambda s: (_SOURCE_ORDER.get(s.source, 9), str(s.folder.parent)))
    for skill in ordered:
        if skill.folder.parent != group:
            group = skill.folder.parent
            lines.append(f"{display_path(group, workspace=workspace, home=home)}/:")
        lines.append(skill_line(skill))
    return "\n".join(lines)


def skill_line(skill: Skill) -> str:
    """`- name: description`, with `(folder/SKILL.md)` when the folder has another name."""
    line = f"- {skill.name}: {short_description(skill.description)}"
    if skill.folder.name != skill.name:
        line += f" ({skill.folder.name}/SKILL.md)"
    return line


def short_description(text: str, cap: int = DESCRIPTION_CAP_CHARS) -> str:
    """`text` on one line, cut at a word boundary to at most `cap` characters."""
    text = " ".join(text.split())
    if len(text) <= cap:
        return text
    cut = text[: cap - 1]
    space = cut.rfind(" ")
    if space > cap // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def display_path(path: Path, *, workspace: Path, home: Path | None = None) -> str:
    """Relative to the workspace when inside it, `~/...` when under the home folder."""
    if path == workspace:
        return "."
    if path.is_relative_to(workspace):
        return path.relative_to(workspace).as_posix()
    home = home if home is not None else Path.home()
    if path.is_relative_to(home):
        return "~/" + path.relative_to(home).as_posix()
    return str(path)
