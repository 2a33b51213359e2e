"""`nodmix plugins install|uninstall` with real pip, in a throwaway environment.

Each test gets its own virtual environment layered over the one running the tests (a `.pth`
file adds its site-packages), so pip installs there and never into the project's environment.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer
from tests.gateway.support import write_config
from tests.support.cli import run_nodmix

pytestmark = pytest.mark.integration

PLUGIN_CODE = """
from nodmix.context.legacy import legacy_factory
from nodmix.plugins.api import Plugin
from nodmix.tools.base import ToolResult


async def roll(args, ctx):
    return ToolResult.text(f"the {args.get('sides')}-sided die shows 4")


def register(api):
    api.tool(
        name="dice_roll",
        description="Roll a die with the given number of sides.",
        parameters={"type": "object", "properties": {"sides": {"type": "string"}}},
    )(roll)
    api.register_context_engine("dice-engine", legacy_factory)


plugin = Plugin(id="dice", name="Dice", register=register)
"""


def _package(root: Path, name: str, *, entry_point: bool) -> Path:
    """A plugin project folder (setuptools, src layout)."""
    module = name.replace("-", "_")
    (root / "src" / module).mkdir(parents=True)
    (root / "src" / module / "__init__.py").write_text(PLUGIN_CODE if entry_point else "")
    eps = f'[project.entry-points."nodmix.plugins"]\ndice = "{module}:plugin"\n'
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "1.2.0"
            """
        )
        + (eps if entry_point else "")
    )
    return root


@pytest.fixture
def python(tmp_path: Path) -> Path:
    """The interpreter of a fresh venv that also sees the test environment's packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = venv / "bin" / "python"
    target = subprocess.run(
        [str(inner), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = site.getsitepackages()[0]
    Path(target, "outer-env.pth").write_text(f"import site; site.addsitedir({outer!r})\n")
    return inner


@pytest.fixture
def configured(isolated_state: Path) -> Iterator[Path]:
    with ScriptedModelServer(tool_then_answer) as server:
        write_config(isolated_state, server.base_url)
        yield isolated_state


def _nodmix(python: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_nodmix(state, *args, python=python, timeout=600)


def _config(state: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((state / "nodmix.json").read_text())
    return loaded


def test_a_plugin_from_a_folder_is_installed_listed_used_and_uninstalled(
    python: Path, configured: Path, tmp_path: Path
) -> None:
    folder = _package(tmp_path / "dice", "nodmix-dice", entry_point=True)
    installed = _nodmix(python, configured, "plugins", "install", str(folder))
    assert installed.returncode == 0, installed.stderr
    assert "nodmix-dice 1.2.0: plugin dice installed and enabled" in installed.stdout
    listed = _nodmix(python, configured, "plugins", "list", "--json")
    turn = _nodmix(python, configured, "agent", "--local", "-m", "use dice_roll 20", "--json")
    slot = _nodmix(
        python, configured, "config", "set", "plugins.slots.contextEngine", "dice-engine"
    )
    assert slot.returncode == 0, slot.stderr
    removed = _nodmix(python, configured, "plugins", "uninstall", "dice")
    after = _nodmix(python, configured, "plugins", "list", "--json")

    dice = next(p for p in json.loads(listed.stdout) if p["id"] == "dice")
    assert dice["enabled"] and dice["loaded"] and dice["tools"] == ["dice_roll"]
    assert dice["source"] == "entry point dice (nodmix-dice)"
    answer = json.loads(turn.stdout)
    assert [c["name"] for c in answer["toolCalls"]] == ["dice_roll"]
    assert answer["reply"] == "the 20-sided die shows 4"
    assert removed.returncode == 0, removed.stderr
    assert "reset to 'legacy'" in removed.stdout
    assert all(p["id"] != "dice" for p in json.loads(after.stdout))
    plugins = _config(configured)["plugins"]
    assert isinstance(plugins, dict)
    assert plugins["slots"] == {"contextEngine": "legacy"}
    assert "dice" not in plugins.get("entries", {})


def test_a_package_without_a_plugin_entry_point_is_refused_and_removed_again(
    python: Path, configured: Path, tmp_path: Path
) -> None:
    folder = _package(tmp_path / "plain", "plain-package", entry_point=False)
    refused = _nodmix(python, configured, "plugins", "install", str(folder))
    missing = _nodmix(python, configured, "plugins", "uninstall", "ghost")
    shown = subprocess.run(
        [str(python), "-m", "pip", "show", "plain-package"], capture_output=True, check=False
    )
    assert refused.returncode == 1
    assert "has no 'nodmix.plugins' entry point" in refused.stderr
    assert shown.returncode != 0  # not left behind
    assert "plugins" not in (configured / "nodmix.json").read_text()  # untouched
    assert missing.returncode == 1 and "no installed plugin package provides 'ghost'" in (
        missing.stderr
    )
    assert "Traceback" not in refused.stderr + missing.stderr


def test_an_installed_package_that_is_no_plugin_is_not_called_already_installed(
    python: Path, configured: Path
) -> None:
    refused = _nodmix(python, configured, "plugins", "install", "six")  # in the test env
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "nodmix: error: six is installed, but it has no 'nodmix.plugins' entry point, so it is "
        "not a Nodmix plugin; nothing changed"
    )
    assert "already installed" not in refused.stdout
    kept = subprocess.run([str(python), "-c", "import six"], capture_output=True, check=False)
    assert kept.returncode == 0  # it was there before: left alone
    assert "plugins" not in (configured / "nodmix.json").read_text()


def test_a_plugin_wheel_is_installed_and_left_disabled_when_asked(
    python: Path, configured: Path, tmp_path: Path
) -> None:
    folder = _package(tmp_path / "dice", "nodmix-dice", entry_point=True)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(tmp_path / "dist"),
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("nodmix_dice-1.2.0-*.whl")
    installed = _nodmix(python, configured, "plugins", "install", str(wheel), "--no-enable")
    listed = _nodmix(python, configured, "plugins", "list", "--json")
    assert installed.returncode == 0, installed.stderr
    assert "plugin dice installed, left disabled" in installed.stdout
    dice = next(p for p in json.loads(listed.stdout) if p["id"] == "dice")
    assert dice["source"] == "entry point dice (nodmix-dice)"
    assert dice["enabled"] is False and dice["tools"] == []
    again = _nodmix(python, configured, "plugins", "install", str(wheel))
    assert again.returncode == 0, again.stderr
    assert f"{wheel} is already installed; nothing changed" in again.stdout


def test_a_target_that_pip_would_read_as_an_option_is_refused(configured: Path) -> None:
    env = {**os.environ, "NODMIX_STATE_DIR": str(configured)}
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodmix",
            "plugins",
            "install",
            "--",
            "--index-url=http://127.0.0.1:9/",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 1
    assert "'--index-url=http://127.0.0.1:9/' is not a folder, a wheel or a package name" in (
        refused.stderr
    )
    assert "pip" not in refused.stderr and "Traceback" not in refused.stderr


def _turn(python: Path, state: Path) -> str:
    turn = _nodmix(python, state, "agent", "--local", "-m", "use dice_roll 20", "--json")
    assert turn.returncode == 0, turn.stderr
    return str(json.loads(turn.stdout)["reply"])


def test_a_project_folder_is_linked_editable_and_edits_apply_without_reinstalling(
    python: Path, configured: Path, tmp_path: Path
) -> None:
    folder = _package(tmp_path / "dice", "nodmix-dice", entry_point=True)
    linked = _nodmix(python, configured, "plugins", "install", "-l", str(folder))
    assert linked.returncode == 0, linked.stderr
    assert f"linked {folder} (editable pip install" in linked.stdout
    assert "nodmix-dice 1.2.0: plugin dice enabled" in linked.stdout
    shown = subprocess.run(
        [str(python), "-m", "pip", "show", "nodmix-dice"], capture_output=True, text=True
    )
    assert f"Editable project location: {folder}" in shown.stdout
    assert _turn(python, configured) == "the 20-sided die shows 4"

    code = folder / "src" / "nodmix_dice" / "__init__.py"
    code.write_text(code.read_text().replace("shows 4", "shows 6"))
    assert _turn(python, configured) == "the 20-sided die shows 6"  # no reinstall

    removed = _nodmix(python, configured, "plugins", "uninstall", "dice")
    assert removed.returncode == 0, removed.stderr
    assert code.exists()  # the folder under development is left alone


def test_a_plain_module_is_linked_through_load_paths_and_unlinked(
    python: Path, configured: Path, tmp_path: Path
) -> None:
    module = tmp_path / "work" / "dice_plugin"
    module.mkdir(parents=True)
    (module / "__init__.py").write_text(PLUGIN_CODE)
    linked = _nodmix(python, configured, "plugins", "install", "--link", str(module))
    assert linked.returncode == 0, linked.stderr
    assert f"linked {module} (plugins.load.paths): plugin dice enabled" in linked.stdout
    plugins = _config(configured)["plugins"]
    assert isinstance(plugins, dict)
    assert plugins["load"] == {"paths": [str(module)]}
    assert plugins["entries"] == {"dice": {"enabled": True}}
    again = _nodmix(python, configured, "plugins", "install", "-l", str(module))
    assert again.returncode == 0 and _config(configured)["plugins"] == plugins  # no duplicate
    assert _turn(python, configured) == "the 20-sided die shows 4"
    (module / "__init__.py").write_text(PLUGIN_CODE.replace("shows 4", "shows 5"))
    assert _turn(python, configured) == "the 20-sided die shows 5"

    unlinked = _nodmix(python, configured, "plugins", "uninstall", "dice")
    assert unlinked.returncode == 0, unlinked.stderr
    assert f"unlinked {module} (plugin dice)" in unlinked.stdout
    plugins = _config(configured)["plugins"]
    assert isinstance(plugins, dict)
    assert plugins["load"] == {"paths": []} and "dice" not in plugins.get("entries", {})
    assert (module / "__init__.py").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    refused = _nodmix(python, configured, "plugins", "install", "-l", str(empty))
    assert refused.returncode == 1 and "-l links a project folder" in refused.stderr
    missing = _nodmix(python, configured, "plugins", "install", "-l", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "no such file or folder" in missing.stderr
    assert "Traceback" not in refused.stderr + missing.stderr
