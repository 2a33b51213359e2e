"""The web page's skills panel in real headless Chromium (see `browser/skills.spec.mjs`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.gateway.support import TOKEN, socket_gateway
from tests.gateway.test_browser import ROOT, _requirements
from tests.skills.support import write_skill

pytestmark = [pytest.mark.browser, pytest.mark.integration]

SPEC = Path(__file__).parent / "browser" / "skills.spec.mjs"


def test_skills_panel_lists_skills_says_why_one_is_blocked_and_sees_new_ones(
    isolated_state: Path, configured: Path
) -> None:
    node, chromium = _requirements()
    skills = isolated_state / "workspace" / "skills"
    write_skill(skills, "trip", "Plan a trip.")
    write_skill(
        skills,
        "radar",
        "Show the rain radar.",
        metadata="metadata:\n  nodmix:\n    requires:\n      bins: [nodmix-test-no-such-bin]\n",
    )
    with socket_gateway() as gateway:
        done = subprocess.run(
            [node, str(SPEC)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={
                **os.environ,
                "GATEWAY_URL": gateway.url,
                "GATEWAY_TOKEN": TOKEN,
                "CHROMIUM_PATH": chromium,
                "SKILLS_DIR": str(skills),
            },
            check=False,
        )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.count(" ok\n") == 3, done.stdout
