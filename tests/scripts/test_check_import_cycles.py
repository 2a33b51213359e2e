"""`scripts/check_import_cycles.py` (the lint stage): it fails on any import circle, however the
import is written, and passes on the tree as it stands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_import_cycles.py"


def _check(src: Path | None = None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(SCRIPT)] + (["--src", str(src)] if src else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_the_source_tree_has_no_import_circle() -> None:
    done = _check()
    assert done.returncode == 0, done.stderr
    assert "no import circles" in done.stdout


@pytest.mark.parametrize(
    "back_import",
    [
        "from pkg.low import helper\n",
        "def f():\n    from pkg import low\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .low import helper\n",
        "import pkg.low\n",
    ],
    ids=["top-level", "lazy", "type-checking-relative", "plain-import"],
)
def test_a_circle_fails_and_names_both_imports(tmp_path: Path, back_import: str) -> None:
    src = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "from pkg.high import thing\n\ndef helper(): ...\n",
            "pkg/high.py": back_import + "\nthing = 1\n",
        },
    )
    done = _check(src)
    assert done.returncode == 1
    assert "src/pkg/low.py:1: pkg.low -> pkg.high" in done.stderr
    assert "pkg.high -> pkg.low" in done.stderr
    assert "1 import circle(s)" in done.stderr


def test_a_package_face_handing_on_names_is_no_circle(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.core import Thing\n",
            "pkg/core.py": "from pkg.parts import part\n\nclass Thing: ...\n",
            "pkg/parts.py": "def part(): ...\n",
            "user.py": "from pkg import Thing\n",
        },
    )
    done = _check(src)
    assert done.returncode == 0, done.stderr
    assert "among 4 modules" in done.stdout
