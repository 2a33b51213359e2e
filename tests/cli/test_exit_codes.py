"""One exit-code convention (docs/operations.md, "Exit codes"): 1 for a mistake in what the
command was asked to do (a value it checks, the config, a name that is not found), 2 for a
command line that is not a command (unknown option or choice, a missing or conflicting
argument, a group without its action); always one line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.support import run_nodmix

VALUE_MISTAKES = [
    ("config", "set", "gateway.port", "not-a-port"),
    ("config", "set", "gateway.prot", "1"),
    ("cron", "add", "--name", "x", "--cron", "61 * * * *", "--message", "m"),
    ("approvals", "allow", "ls 'unclosed"),
    ("sessions", "show", "no-such-session"),
    ("agent", "--local", "-m", " "),
    ("plugins", "uninstall", "ghost"),
]
USAGE_MISTAKES = [
    ("config", "set", "gateway.port"),
    ("agent", "--no-such-option"),
    ("agent", "--local", "--chat", "-m", "hi"),
    ("completion", "powershell"),
    ("cron",),
    ("no-such-command",),
]


@pytest.mark.parametrize("args", VALUE_MISTAKES, ids=" ".join)
def test_a_value_the_command_checks_exits_1_with_one_line(
    isolated_state: Path, args: tuple[str, ...]
) -> None:
    done = run_nodmix(isolated_state, *args)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("nodmix: error: ")


@pytest.mark.parametrize("args", USAGE_MISTAKES, ids=" ".join)
def test_a_command_line_that_is_no_command_exits_2(
    isolated_state: Path, args: tuple[str, ...]
) -> None:
    done = run_nodmix(isolated_state, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
