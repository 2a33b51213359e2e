"""The verdicts for one agent: locations in override order, extra folders, the allowlist."""

from __future__ import annotations

from pathlib import Path

from nodmix.config.schema import (
    AgentConfig,
    AgentsConfig,
    NodmixConfig,
    SkillsConfig,
    SkillsLoadConfig,
)
from nodmix.skills.book import SkillBook
from tests.skills.support import write_skill


def test_agent_allowlist_offers_only_named_skills(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    for name in ("one", "two"):
        path = bundled / name / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"---\nname: {name}\ndescription: d\n---\n", encoding="utf-8")
    config = NodmixConfig(
        agents=AgentsConfig(entries=[AgentConfig(id="work", skills=["two"])]),
        skills=SkillsConfig(),
    )
    book = SkillBook(state_dir=tmp_path / "state", bundled_dir=bundled)

    def review(agent_id: str) -> dict[str, tuple[str, ...]]:
        result = book.review(
            config,
            raw_config={},
            config_dir=tmp_path,
            agent_id=agent_id,
            workspace=tmp_path / "ws",
            env={},
        )
        return {s.skill.name: s.reasons for s in result.statuses}

    assert review("main") == {"one": (), "two": ()}
    assert review("work") == {"one": ("not in the skills allowlist of agent 'work'",), "two": ()}


def test_extra_dirs_are_relative_to_the_config_file_and_override_earlier_locations(
    tmp_path: Path,
) -> None:
    config_dir, state, workspace = tmp_path / "conf", tmp_path / "state", tmp_path / "ws"
    write_skill(state / "skills", "notes", "Installed notes.")
    write_skill(workspace / "skills", "notes", "Workspace notes.")
    write_skill(config_dir / "team", "notes", "Team notes.")
    write_skill(tmp_path / "solo", "solo", "A single skill folder.")
    config = NodmixConfig(
        skills=SkillsConfig(load=SkillsLoadConfig(extra_dirs=["team", str(tmp_path / "solo")]))
    )
    book = SkillBook(state_dir=state, bundled_dir=tmp_path / "none")
    review = book.review(
        config,
        raw_config={},
        config_dir=config_dir,
        agent_id="main",
        workspace=workspace,
        env={},
    )
    found = {s.skill.name: s for s in review.statuses}
    assert found["notes"].skill.description == "Team notes."
    assert found["notes"].skill.source == "extra"
    assert found["notes"].overrides == (
        state / "skills" / "notes",
        workspace.absolute() / "skills" / "notes",
    )
    assert found["solo"].eligible
