"""`nodmix config get/set` behaviour: effective values, defaults, redaction, schema-aware
parsing, "did you mean", JSON5 positions (library calls and the real CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.config.edit import parse_key
from nodmix.config.effective import Marked, effective_value, plain, redact
from nodmix.config.keys import parse_value_for
from nodmix.config.loader import load_config
from nodmix.errors import ConfigError
from tests.support.cli import run_nodmix


def write(state: Path, text: str) -> Path:
    path = state / "nodmix.json"
    path.write_text(text, encoding="utf-8")
    return path


SECRETS = (
    "{ models: { providers: { x: { apiKey: 'sk-live', baseUrl: 'http://a',"
    " headers: { Authorization: 'Bearer b' } } } },"
    " gateway: { auth: { token: 'tok-9f' } },"
    " mcp: { servers: { s: { url: 'http://m', headers: { 'x-api': '${MCP_KEY}' } } } } }"
)


def test_effective_value_marks_defaults_and_keeps_set_values(isolated_state: Path) -> None:
    write(isolated_state, "{ gateway: { bind: 'lan' } }")
    loaded = load_config()
    port = effective_value(loaded.config, loaded.raw, parse_key("gateway.port"), "gateway.port")
    bind = effective_value(loaded.config, loaded.raw, parse_key("gateway.bind"), "gateway.bind")
    assert port == Marked(18789) and bind == "lan"


def test_redaction_hides_secret_fields_but_not_env_references(isolated_state: Path) -> None:
    write(isolated_state, SECRETS.replace("'tok-9f'", "'${GW_TOKEN}'"))
    loaded = load_config()
    tree = plain(redact(effective_value(loaded.config, loaded.raw, [], "")))
    provider = tree["models"]["providers"]["x"]
    assert provider["apiKey"] == "***" and provider["headers"]["Authorization"] == "***"
    assert tree["gateway"]["auth"]["token"] == "${GW_TOKEN}"
    assert provider["baseUrl"] == "http://a"


def test_redaction_hides_channel_tokens_and_passwords_whatever_their_prefix(
    isolated_state: Path,
) -> None:
    write(
        isolated_state,
        "{ channels: { telegram: { botToken: '123:abc' } },"
        " models: { providers: { x: { baseUrl: 'http://a', headers: { 'x-api-key': 'k1' } } } },"
        " agents: { defaults: { compaction: { reserveTokens: 2000 } } } }",
    )
    loaded = load_config()
    tree = plain(redact(effective_value(loaded.config, loaded.raw, [], "")))
    assert tree["channels"]["telegram"]["botToken"] == "***"
    assert tree["models"]["providers"]["x"]["headers"]["x-api-key"] == "***"
    assert tree["agents"]["defaults"]["compaction"]["reserveTokens"] == 2000


def test_set_reads_bare_text_only_for_string_keys() -> None:
    primary = "agents.defaults.model.primary"
    assert parse_value_for(primary, parse_key(primary), "openai/gpt-4.1") == "openai/gpt-4.1"
    assert parse_value_for("gateway.port", parse_key("gateway.port"), "18790") == 18790
    with pytest.raises(ConfigError) as caught:
        parse_value_for("gateway.port", parse_key("gateway.port"), "abc")
    assert str(caught.value) == 'gateway.port: not a valid JSON5 value: unexpected "a" at column 1'
    mode = "agents.defaults.compaction.mode"
    assert parse_value_for(mode, parse_key(mode), "safeguard") == "safeguard"


def test_unknown_keys_get_a_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"gateway\.prot: unknown key \(did you mean 'port'\?\)"):
        parse_value_for("gateway.prot", parse_key("gateway.prot"), "1")
    with pytest.raises(ConfigError, match=r"agents\.defualts: .*did you mean 'defaults'"):
        parse_value_for("agents.defualts.maxSteps", parse_key("agents.defualts.maxSteps"), "3")


def test_loading_an_unknown_key_suggests_the_closest_one(isolated_state: Path) -> None:
    path = write(isolated_state, "{ agents: { defaults: { maxStep: 3 } } }")
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert str(caught.value) == (
        f"{path}: agents.defaults.maxStep: unknown key (did you mean 'maxSteps'?)"
    )


def test_a_json5_syntax_error_names_file_line_and_column(isolated_state: Path) -> None:
    path = write(isolated_state, "{\n  gateway: { port: 1 }\n  agents: {}\n}\n")
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert str(caught.value) == f'{path}: line 3, column 3: unexpected "a" (not valid JSON5)'


def test_config_get_cli_shows_defaults_and_redacts(isolated_state: Path) -> None:
    write(isolated_state, SECRETS)
    port = run_nodmix(isolated_state, "config", "get", "gateway.port")
    assert (port.returncode, port.stdout) == (0, "18789 (default)\n")
    assert run_nodmix(isolated_state, "config", "get", "gateway.port", "--json").stdout == "18789\n"
    assert run_nodmix(isolated_state, "config", "get", "gateway.auth.token").stdout == "***\n"
    shown = run_nodmix(isolated_state, "config", "get", "gateway.auth.token", "--show-secrets")
    assert shown.stdout == "tok-9f\n"
    whole = run_nodmix(isolated_state, "config", "get")
    assert whole.returncode == 0, whole.stderr
    assert "sk-live" not in whole.stdout and "tok-9f" not in whole.stdout
    assert '"port": 18789,  // default' in whole.stdout
    assert '"baseUrl": "http://a",' in whole.stdout
    unknown = run_nodmix(isolated_state, "config", "get", "gateway.prot")
    assert unknown.returncode == 1
    assert unknown.stderr == "nodmix: error: gateway.prot: unknown key (did you mean 'port'?)\n"


def test_config_set_cli_refuses_a_bad_value_and_keeps_the_file(isolated_state: Path) -> None:
    path = write(isolated_state, "{}")
    bad = run_nodmix(isolated_state, "config", "set", "gateway.port", "abc")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        'nodmix: error: gateway.port: not a valid JSON5 value: unexpected "a" at column 1'
    ]
    assert path.read_text(encoding="utf-8") == "{}"
    typo = run_nodmix(isolated_state, "config", "set", "gateway.prot", "1")
    assert "did you mean 'port'" in typo.stderr and typo.returncode == 1
    good = run_nodmix(
        isolated_state, "config", "set", "agents.defaults.model.primary", "openai/gpt-4.1"
    )
    assert good.returncode == 0, good.stderr
    got = run_nodmix(isolated_state, "config", "get", "agents.defaults.model.primary")
    assert got.stdout == "openai/gpt-4.1\n"
