"""`security audit` names exec allowlist patterns that let any command run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodmix.cli.main import main
from nodmix.security.allowlist import Allowlist


def _audit(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    main(["security", "audit", "--json"])
    findings: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["findings"]
    return [f for f in findings if f["id"] == "exec.allowlist-anything"]


@pytest.mark.parametrize("wide", ["*", "* **", "bash **", "sh -c *", "python3 **", "env **"])
def test_a_pattern_that_covers_any_command_is_named_with_its_revoke_command(
    isolated_state: Path, capsys: pytest.CaptureFixture[str], wide: str
) -> None:
    allowlist = Allowlist(isolated_state)
    pattern = allowlist.add(wide)
    found = _audit(capsys)
    assert len(found) == 1
    assert repr(wide) in found[0]["title"] and f"approvals revoke {pattern.id}" in found[0]["fix"]


def test_exact_commands_and_narrow_globs_are_not_flagged(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    allowlist = Allowlist(isolated_state)
    for narrow in ("git status", "git log **", "ls -la *", "cat **", "/usr/bin/make **"):
        allowlist.add(narrow)
    assert _audit(capsys) == []
