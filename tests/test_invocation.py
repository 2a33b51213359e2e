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


# ---- install_command: how a hint adds an extra to this installation --------------------------


def _venv(root: Path, *, pip: bool = True) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").touch()
    if pip:
        (root / "bin" / "pip").touch()
    return root


def test_a_venv_below_the_working_directory_uses_its_pip_by_relative_path(tmp_path: Path) -> None:
    from nodmix.invocation import install_command

    venv = _venv(tmp_path / ".venv")
    shown = install_command(["discord"], prefix=venv, base_prefix=Path("/usr"), cwd=tmp_path)
    assert shown == ".venv/bin/pip install 'nodmix[discord]'"


def test_a_venv_elsewhere_and_without_pip_is_named_by_absolute_path(tmp_path: Path) -> None:
    from nodmix.invocation import install_command

    venv = _venv(tmp_path / "env", pip=False)
    shown = install_command(
        ["telegram"], keep=["web"], prefix=venv, base_prefix=Path("/usr"), cwd=tmp_path / "work"
    )
    assert shown == f"{venv}/bin/python -m pip install 'nodmix[telegram]'"


def test_pipx_reinstalls_with_the_new_extra_and_those_already_there(tmp_path: Path) -> None:
    from nodmix.invocation import install_command

    venv = _venv(tmp_path / "pipx" / "venvs" / "nodmix")
    (venv / "pipx_metadata.json").write_text(
        '{"main_package": {"package": "nodmix", "package_or_url": "nodmix"}}'
    )
    shown = install_command(["discord"], keep=["telegram"], prefix=venv, base_prefix=Path("/usr"))
    assert shown == "pipx install --force 'nodmix[discord,telegram]'"
    checkout = tmp_path / "src" / "nodmix"
    (venv / "pipx_metadata.json").write_text(
        f'{{"main_package": {{"package": "nodmix", "package_or_url": "{checkout}"}}}}'
    )
    shown = install_command(["discord"], prefix=venv, base_prefix=Path("/usr"))
    assert shown == f"pipx install --force 'nodmix[discord] @ {checkout.as_uri()}'"


def test_uv_tool_reinstalls_from_where_its_receipt_says(tmp_path: Path) -> None:
    from nodmix.invocation import install_command

    tool = _venv(tmp_path / "uv" / "tools" / "nodmix", pip=False)
    (tool / "uv-receipt.toml").write_text(
        '[tool]\nrequirements = [{ name = "nodmix", extras = ["web"] }]\n'
    )
    shown = install_command(["slack"], keep=["web"], prefix=tool, base_prefix=Path("/usr"))
    assert shown == "uv tool install 'nodmix[slack,web]'"
    (tool / "uv-receipt.toml").write_text(
        f'[tool]\nrequirements = [{{ name = "nodmix", directory = "{tmp_path}" }}]\n'
    )
    shown = install_command(["slack"], prefix=tool, base_prefix=Path("/usr"))
    assert shown == f"uv tool install 'nodmix[slack] @ {tmp_path.as_uri()}'"
