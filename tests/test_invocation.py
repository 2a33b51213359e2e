"""Printed hints name the command that runs this install, so they work when pasted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PROGRAM = "from nodmix.invocation import command; print(command('doctor'))"


def _hint(cwd: Path, path: str) -> str:
    env = {**os.environ, "PATH": path}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_a_script_not_on_path_is_named_by_its_path_and_the_hint_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "nodmix"
    if not script.is_file():
        pytest.skip("this interpreter has no nodmix script next to it")
    hint = _hint(tmp_path, "/usr/bin:/bin")
    assert hint == f"{script} doctor"
    ran = subprocess.run(
        [*hint.split()[:-1], "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout.startswith("nodmix ")


def test_a_script_on_path_is_named_plainly(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "nodmix"
    if not script.is_file():
        pytest.skip("this interpreter has no nodmix script next to it")
    assert _hint(tmp_path, f"{script.parent}:/usr/bin:/bin") == "nodmix doctor"
