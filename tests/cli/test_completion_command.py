"""`nodmix completion`: scripts that the shells load and that complete real commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.support import run_nodmix


def _bash_complete(script: Path, *words: str) -> list[str]:
    """COMPREPLY of the generated bash completion for the words typed so far."""
    quoted = " ".join(f"'{w}'" for w in words)
    line = " ".join(words)
    program = (
        f"source '{script}'; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        f"COMP_LINE='{line}'; COMP_POINT={len(line)}; _shtab_nodmix; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.split()


def test_bash_completion_completes_commands_actions_and_options(
    isolated_state: Path, tmp_path: Path
) -> None:
    done = run_nodmix(isolated_state, "completion", "bash")
    assert done.returncode == 0, done.stderr
    script = tmp_path / "nodmix.bash"
    script.write_text(done.stdout)
    assert "status" in _bash_complete(script, "nodmix", "sta")
    assert _bash_complete(script, "nodmix", "models", "") == ["list", "set", "test"]
    assert "--follow" in _bash_complete(script, "nodmix", "logs", "--fo")
    assert "uninstall" in _bash_complete(script, "nodmix", "plugins", "un")


def test_zsh_and_fish_scripts_name_every_command(isolated_state: Path, tmp_path: Path) -> None:
    zsh = run_nodmix(isolated_state, "completion", "zsh")
    fish = run_nodmix(isolated_state, "completion", "fish")
    assert zsh.returncode == 0 and fish.returncode == 0
    assert zsh.stdout.startswith("#compdef nodmix")
    lines = fish.stdout.splitlines()
    for command in ("agent", "gateway", "status", "logs", "models", "onboard", "plugins"):
        assert any(f"__fish_use_subcommand -a {command} -d" in line for line in lines), command
    assert any("-l follow" in line and "logs" in line for line in lines)
    assert any("-a install -d" in line and "gateway" in line for line in lines)
    for shell, text in (("zsh", zsh.stdout), ("fish", fish.stdout)):
        if shutil.which(shell) is None:
            continue  # the text checks above still hold
        path = tmp_path / f"nodmix.{shell}"
        path.write_text(text)
        syntax = subprocess.run([shell, "-n", str(path)], capture_output=True, timeout=30)
        assert syntax.returncode == 0, syntax.stderr


def test_an_unknown_shell_is_one_clear_error(isolated_state: Path) -> None:
    done = run_nodmix(isolated_state, "completion", "powershell")
    assert done.returncode == 2 and "invalid choice: 'powershell'" in done.stderr
    assert "Traceback" not in done.stderr


pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("shell", "where"),
    [
        ("bash", ".local/share/bash-completion/completions/nodmix"),
        ("zsh", ".zfunc/_nodmix"),
        ("fish", ".config/fish/completions/nodmix.fish"),
    ],
)
def test_install_writes_the_script_where_the_shell_loads_it_on_a_fresh_home(
    isolated_state: Path, tmp_path: Path, shell: str, where: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""}
    done = run_nodmix(isolated_state, "completion", shell, "--install", env=env)
    assert done.returncode == 0, done.stderr
    script = home / where
    assert done.stdout.startswith(f"wrote {script}\n")
    printed = run_nodmix(isolated_state, "completion", shell, env=env).stdout
    assert script.read_text() == printed


def test_the_documented_redirect_works_on_a_fresh_home(
    isolated_state: Path, tmp_path: Path
) -> None:
    """docs/operations.md's by-hand lines, run as written with a fresh HOME."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    block = doc.split("Without `--install` the script goes to stdout")[1].split("```bash\n")[1]
    lines = block.split("```")[0].strip().splitlines()
    home = tmp_path / "home"
    home.mkdir()
    nodmix = f"{sys.executable} -m nodmix"
    script = "\n".join(line.replace(".venv/bin/nodmix", nodmix) for line in lines)
    env = {**os.environ, "HOME": str(home), "NODMIX_STATE_DIR": str(isolated_state)}
    subprocess.run(["bash", "-ec", script], env=env, check=True, timeout=60)
    assert "_shtab_nodmix" in (home / ".local/share/bash-completion/completions/nodmix").read_text()
