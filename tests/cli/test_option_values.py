"""Counts and timeouts given on the command line are checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.cli.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--timeout", "-1"],
        ["status", "--timeout", "0"],
        ["models", "test", "--timeout", "nan"],
        ["logs", "-n", "-5"],
        ["sessions", "tail", "main", "-n", "-3"],
        ["logs", "-n", "many"],
    ],
)
def test_a_negative_or_non_numeric_count_or_timeout_is_a_usage_error(
    isolated_state: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("nodmix ") and argv[-1] in error
