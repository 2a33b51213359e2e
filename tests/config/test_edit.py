"""Editing nodmix.json by key path, through the CLI and the edit module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.cli.main import main
from nodmix.config.edit import get_value, parse_key, set_value, unset_value
from nodmix.errors import ConfigError


def test_key_paths_parse_dots_and_indexes() -> None:
    assert parse_key("agents.list[0].tools.codeMode") == ["agents", "list", 0, "tools", "codeMode"]
    with pytest.raises(ConfigError):
        parse_key("a..b[")


def test_set_creates_intermediate_objects_and_lists() -> None:
    doc = set_value({}, "agents.list[0].id", "ops")
    assert doc == {"agents": {"list": [{"id": "ops"}]}}
    assert get_value(doc, "agents.list[0].id") == "ops"


def test_unset_of_missing_key_is_an_error() -> None:
    with pytest.raises(ConfigError):
        unset_value({"a": 1}, "b")


def test_cli_set_get_unset_round_trip(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "set", "agents.defaults.model.primary", "ollama/llama3.2"]) == 0
    assert main(["config", "set", "tools.deny", '["exec"]']) == 0
    capsys.readouterr()
    assert main(["config", "get", "agents.defaults.model.primary"]) == 0
    assert capsys.readouterr().out.strip() == "ollama/llama3.2"
    saved = json.loads((isolated_state / "nodmix.json").read_text(encoding="utf-8"))
    assert saved["tools"]["deny"] == ["exec"]
    assert main(["config", "unset", "tools.deny"]) == 0
    assert main(["config", "validate"]) == 0


def test_cli_set_refuses_invalid_value_and_leaves_file_untouched(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "set", "gateway.port", "18790"]) == 0
    before = (isolated_state / "nodmix.json").read_text(encoding="utf-8")
    assert main(["config", "set", "gateway.port", "not-a-number"]) == 1
    err = capsys.readouterr().err
    assert "gateway.port" in err and "not a valid JSON5 value" in err
    assert (isolated_state / "nodmix.json").read_text(encoding="utf-8") == before


def test_cli_validate_reports_broken_file_with_non_zero_exit(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated_state / "nodmix.json").write_text('{"tools": {"deny": "exec"}}', encoding="utf-8")
    assert main(["config", "validate", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and out["key"] == "tools.deny"


def test_cli_schema_is_json_schema_of_the_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "NodmixConfig" in schema["$defs"]
