"""Loading and validating nodmix.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.config.loader import load_config, resolve_secret, validate
from nodmix.config.schema import CodeModeConfig, NodmixConfig
from nodmix.errors import ConfigError


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    loaded = load_config(tmp_path / "absent.json")
    assert loaded.exists is False
    assert loaded.config == NodmixConfig()


def test_json5_comments_trailing_commas_and_unquoted_keys_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "nodmix.json"
    path.write_text(
        "// my config\n{ tools: { codeMode: { enabled: true, timeoutMs: 2000, }, }, }\n",
        encoding="utf-8",
    )
    config = load_config(path).config
    assert config.tools.code_mode == CodeModeConfig(enabled=True, timeout_ms=2000)


def test_unknown_key_names_file_dotted_path_and_allowed_keys(tmp_path: Path) -> None:
    path = tmp_path / "nodmix.json"
    path.write_text('{"tools": {"alow": ["read"]}}', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.file == str(path)
    assert err.value.key == "tools.alow"
    assert str(err.value).endswith("unknown key (did you mean 'allow'?)")
    path.write_text('{"tools": {"zzz": 1}}', encoding="utf-8")
    with pytest.raises(ConfigError) as far:
        load_config(path)
    assert "expected one of" in str(far.value) and "allow" in str(far.value)


def test_wrong_type_inside_a_mapping_names_the_mapping_key() -> None:
    doc = {"models": {"providers": {"local": {"models": [{"id": "m", "contextWindow": "big"}]}}}}
    with pytest.raises(ConfigError) as err:
        validate(doc, file="nodmix.json")
    assert err.value.key == "models.providers.local.models[0].contextWindow"
    assert "expected int, got str" in str(err.value)


def test_invalid_json5_is_one_line_error_with_file(tmp_path: Path) -> None:
    path = tmp_path / "nodmix.json"
    path.write_text("{ tools: ", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"gateway": {"port": 1}, "gateway": {"port": 2}}', "gateway"),  # JSON
        ("{gateway: {port: 1, port: 2,},}", "port"),  # JSON5
    ],
    ids=["json", "json5"],
)
def test_a_key_given_twice_is_refused_not_silently_dropped(
    tmp_path: Path, text: str, key: str
) -> None:
    path = tmp_path / "nodmix.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value) and f"key {key!r} appears twice" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 5000 + b"1" + b"}" * 5000],
    ids=["not-utf8", "deep-array", "deep-object"],
)
def test_unreadable_or_absurdly_nested_file_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "nodmix.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.file == str(path)
    assert "\n" not in str(err.value)


def test_a_wrong_enum_value_lists_the_values_the_key_takes() -> None:
    with pytest.raises(ConfigError) as err:
        validate({"tools": {"exec": {"security": "ful"}}}, file="nodmix.json")
    assert err.value.key == "tools.exec.security"
    assert str(err.value).endswith("""(expected one of: "deny", "allowlist", "full")""")
    with pytest.raises(ConfigError) as inner:
        validate({"models": {"providers": {"p": {"api": "soap"}}}}, file="nodmix.json")
    assert inner.value.key == "models.providers.p.api"
    assert '"openai-completions"' in str(inner.value)


def test_a_gateway_bind_that_is_no_address_is_refused_when_the_file_is_read() -> None:
    with pytest.raises(ConfigError) as err:
        validate({"gateway": {"bind": "not a host!"}}, file="nodmix.json")
    assert err.value.key == "gateway.bind"
    for good in ("lan", "loopback", "::1", "192.168.1.4"):
        validate({"gateway": {"bind": good}}, file="nodmix.json")


@pytest.mark.parametrize("url", ["localhost:8000/v1", "127.0.0.1", "ftp://host/v1", "http://"])
def test_a_provider_base_url_that_is_not_http_names_the_provider_key(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate({"models": {"providers": {"local": {"baseUrl": url}}}}, file="nodmix.json")
    assert err.value.key == "models.providers.local.baseUrl"
    assert "http:// or https://" in str(err.value)


@pytest.mark.parametrize("port", [0, -1, 65536, 99999])
def test_a_gateway_port_outside_the_tcp_range_is_refused(port: int) -> None:
    with pytest.raises(ConfigError) as err:
        validate({"gateway": {"port": port}}, file="nodmix.json")
    assert err.value.key == "gateway.port"


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"agents": {"defaults": {"model": {"primary": "gpt"}}}}, "agents.defaults.model.primary"),
        ({"agents": {"list": [{"id": "a"}, {"id": "a"}]}}, "agents.list[1].id"),
        ({"agents": {"list": [{"id": "Bad Id"}]}}, "agents.list[0].id"),
        ({"mcp": {"servers": {"x": {"command": "a", "url": "http://b"}}}}, "mcp.servers.x"),
        (
            {"models": {"providers": {"p": {"models": [{"id": "m", "maxTokens": 0}]}}}},
            "models.providers.p.models[0].maxTokens",
        ),
    ],
)
def test_cross_field_rules_name_the_offending_key(doc: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(doc, file="nodmix.json")
    assert err.value.key == key


def test_secret_references_resolve_from_environment() -> None:
    assert resolve_secret("${MY_KEY}", key="k", env={"MY_KEY": "s3cret"}) == "s3cret"
    assert resolve_secret("literal", key="k", env={}) == "literal"
    with pytest.raises(ConfigError) as err:
        resolve_secret("${MISSING_KEY}", key="models.providers.x.apiKey", env={})
    assert "MISSING_KEY" in str(err.value) and err.value.key == "models.providers.x.apiKey"


@pytest.mark.parametrize(
    ("doc", "key", "words"),
    [
        ({"agents": {"defaults": {"heartbeat": {"every": "soon"}}}}, "every", "30s, 20m"),
        ({"hooks": {"mappings": {"m": {"message": "x", "deliver": "nowhere"}}}}, "deliver", "4242"),
        ({"memory": {"shareWith": ["everyone"]}}, "shareWith[0]", "webhook:<name>"),
    ],
)
def test_a_value_that_does_not_match_its_pattern_says_what_it_should_look_like(
    doc: dict[str, object], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        validate(doc, file="nodmix.json")
    assert (err.value.key or "").endswith(key)
    assert words in str(err.value) and "regex" not in str(err.value)


def test_a_heartbeat_under_a_second_is_refused_rather_than_beating_without_pause() -> None:
    with pytest.raises(ConfigError) as err:
        validate({"agents": {"defaults": {"heartbeat": {"every": "0m"}}}}, file="nodmix.json")
    assert err.value.key == "agents.defaults.heartbeat.every"
    validate({"agents": {"defaults": {"heartbeat": {"every": "1s"}}}}, file="nodmix.json")
