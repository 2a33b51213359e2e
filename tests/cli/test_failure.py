"""A failed command ends in one line: exception groups unwrap to the error that caused them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from nodmix.cli.failure import is_interrupt, leaf_error, one_line
from nodmix.errors import MCPError


async def _fail_with(*errors: BaseException) -> None:
    async def raise_it(exc: BaseException) -> None:
        raise exc

    async with anyio.create_task_group() as tg:
        for exc in errors:
            tg.start_soon(raise_it, exc)


def _group_from_task_group(*errors: BaseException) -> BaseExceptionGroup[BaseException]:
    try:
        anyio.run(_fail_with, *errors)
    except BaseExceptionGroup as group:
        return group
    raise AssertionError("the task group did not fail")


def test_a_nodmix_error_inside_nested_task_groups_is_the_line_shown() -> None:
    inner = BaseExceptionGroup("inner", [RuntimeError("noise"), MCPError("time: server died")])
    group = _group_from_task_group(ValueError("other"), inner)
    assert one_line(leaf_error(group)) == "time: server died"


def test_a_foreign_error_in_a_task_group_is_one_line_naming_it() -> None:
    group = _group_from_task_group(ValueError("bad value\nsecond line"))
    line = one_line(leaf_error(group))
    assert line.startswith("ValueError: bad value second line")
    assert "--verbose" in line and "\n" not in line


def test_a_missing_package_names_the_fix() -> None:
    line = one_line(ModuleNotFoundError("No module named 'sniffio'", name="sniffio"))
    assert "'sniffio'" in line and "pip install" in line


def test_an_os_error_is_its_reason_and_file() -> None:
    try:
        open("/nonexistent/nodmix/file")  # noqa: SIM115
    except OSError as exc:
        assert one_line(exc).startswith("No such file or directory: /nonexistent/nodmix/file")


def test_ctrl_c_inside_a_group_counts_as_an_interrupt() -> None:
    assert is_interrupt(BaseExceptionGroup("g", [KeyboardInterrupt()]))
    assert not is_interrupt(BaseExceptionGroup("g", [KeyboardInterrupt(), ValueError("x")]))


@pytest.mark.integration
def test_a_state_dir_that_is_a_file_fails_in_one_line_and_verbose_adds_the_traceback(
    tmp_path: Path,
) -> None:
    """A state dir that is a file is one line naming it and the fix, however deep it is found."""
    state = tmp_path / "state-file"
    state.write_text("not a directory", encoding="utf-8")
    env = {
        **os.environ,
        "NODMIX_STATE_DIR": str(state),
        "NODMIX_CONFIG_PATH": str(tmp_path / "nodmix.json"),
    }
    command = [sys.executable, "-m", "nodmix", "agent", "--local", "--no-tools", "-m", "hi"]
    quiet = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert quiet.returncode == 1
    assert quiet.stderr.splitlines() == [
        f"nodmix: error: the state directory {state} is a file, not a directory;"
        " set NODMIX_STATE_DIR to a directory"
    ]
    loud = subprocess.run(
        [*command, "--verbose"], capture_output=True, text=True, env=env, timeout=60
    )
    assert loud.returncode == 1
    assert "Traceback" in loud.stderr and "ConfigError" in loud.stderr
    assert loud.stderr.rstrip().splitlines()[-1] == quiet.stderr.rstrip()
