"""The system-prompt section: one compact line per skill, never the body."""

from __future__ import annotations

from pathlib import Path

from nodmix.skills.model import Skill
from nodmix.skills.prompt import DESCRIPTION_CAP_CHARS, skills_section


def _skill(name: str, folder: Path, description: str = "Does a thing.") -> Skill:
    return Skill(name=name, description=description, folder=folder, source="workspace")


def _sourced(skill: Skill, source: str) -> Skill:
    return Skill(
        name=skill.name,
        description=skill.description,
        folder=skill.folder,
        source=source,  # type: ignore[arg-type]
    )


def test_one_line_per_skill_under_its_folder_with_short_paths(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    skills = [
        _skill("local", workspace / "skills" / "local"),
        _skill("renamed", workspace / "skills" / "old-folder"),
        _sourced(_skill("mine", home / ".nodmix" / "skills" / "mine"), "managed"),
        _sourced(_skill("shared", Path("/opt/skills/shared")), "bundled"),
    ]
    section = skills_section(skills, workspace=workspace, home=home)
    assert section is not None
    lines = section.splitlines()
    assert "read its SKILL.md" in lines[0]
    assert "F/<name>/SKILL.md" in lines[0]
    assert lines[1:] == [
        "/opt/skills/:",
        "- shared: Does a thing.",
        "~/.nodmix/skills/:",
        "- mine: Does a thing.",
        "skills/:",
        "- local: Does a thing.",
        "- renamed: Does a thing. (old-folder/SKILL.md)",
    ]


def test_long_descriptions_are_cut_at_a_word(tmp_path: Path) -> None:
    text = "Summarise long reports " + "carefully " * 30
    section = skills_section([_skill("r", tmp_path / "r", text)], workspace=tmp_path)
    assert section is not None
    line = section.splitlines()[2]
    description = line.removeprefix("- r: ")
    assert description.endswith("carefully…")
    assert len(description) <= DESCRIPTION_CAP_CHARS


def test_no_skills_no_section(tmp_path: Path) -> None:
    assert skills_section([], workspace=tmp_path) is None


def test_code_mode_points_at_the_skills_namespace(tmp_path: Path) -> None:
    section = skills_section([_skill("a", tmp_path / "a")], workspace=tmp_path, code_mode=True)
    assert section is not None
    assert "skills.list()" in section.splitlines()[0]
