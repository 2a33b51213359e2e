"""The skills shipped with Nodmix parse, are offered out of the box, and fit the prompt line."""

from __future__ import annotations

from pathlib import Path

from nodmix.config.schema import NodmixConfig
from nodmix.skills import BUNDLED_DIR, SkillBook
from nodmix.skills.frontmatter import read_body
from nodmix.skills.prompt import DESCRIPTION_CAP_CHARS


def test_bundled_skills_are_offered_with_a_default_config(tmp_path: Path) -> None:
    review = SkillBook(state_dir=tmp_path).review(
        NodmixConfig(),
        raw_config={},
        config_dir=tmp_path,
        agent_id="main",
        workspace=tmp_path / "ws",
        env={},
    )
    assert review.problems == ()
    names = {s.skill.name: s for s in review.statuses}
    assert {"daily-note", "web-summary", "skill-creator", "reminders"} <= set(names)
    for status in names.values():
        assert status.eligible, status.reasons
        assert status.skill.folder.parent == BUNDLED_DIR
        assert status.skill.folder.name == status.skill.name
        assert len(status.skill.description) <= DESCRIPTION_CAP_CHARS
        assert len(read_body(status.skill.file).splitlines()) >= 10
