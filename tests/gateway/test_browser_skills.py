"""The web page's skills panel in real headless Chromium (see `browser/skills.spec.mjs`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import socket_gateway
from tests.skills.support import write_skill

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_skills_panel_lists_skills_says_why_one_is_blocked_and_sees_new_ones(
    isolated_state: Path, configured: Path
) -> None:
    skills = isolated_state / "workspace" / "skills"
    write_skill(skills, "trip", "Plan a trip.")
    write_skill(
        skills,
        "radar",
        "Show the rain radar.",
        metadata="metadata:\n  nodmix:\n    requires:\n      bins: [nodmix-test-no-such-bin]\n",
    )
    with socket_gateway() as gateway:
        done = run_spec("skills", gateway.url, SKILLS_DIR=str(skills))
    assert_steps_passed(done, 3)
