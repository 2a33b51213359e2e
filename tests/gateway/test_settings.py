"""Resolving where the gateway listens and its token; refusing unsafe binds."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.config.loader import load_config
from nodmix.config.schema import GatewayAuthConfig, GatewayConfig
from nodmix.errors import ConfigError
from nodmix.gateway.settings import resolve_bind, resolve_settings


@pytest.mark.parametrize(
    ("bind", "host"),
    [
        (None, "127.0.0.1"),
        ("loopback", "127.0.0.1"),
        ("localhost", "127.0.0.1"),
        ("lan", "0.0.0.0"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("10.1.2.3", "10.1.2.3"),
    ],
)
def test_bind_aliases_and_addresses_resolve(bind: str | None, host: str) -> None:
    assert resolve_bind(bind) == host


def test_an_unknown_bind_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_bind("everywhere")
    assert raised.value.key == "gateway.bind"


def test_defaults_are_loopback_port_18789_and_no_token() -> None:
    settings = resolve_settings(GatewayConfig(), {})
    assert (settings.host, settings.port, settings.token) == ("127.0.0.1", 18789, None)
    assert settings.loopback_only and settings.url == "http://127.0.0.1:18789"


def test_command_line_beats_environment_beats_config() -> None:
    config = GatewayConfig(port=9000, bind="loopback", auth=GatewayAuthConfig(token="from-config"))
    assert resolve_settings(config, {}).token == "from-config"
    assert resolve_settings(config, {}).port == 9000
    env = {"NODMIX_GATEWAY_TOKEN": "from-env"}
    assert resolve_settings(config, env).token == "from-env"
    chosen = resolve_settings(config, env, token="from-flag", port=9100)
    assert (chosen.token, chosen.port) == ("from-flag", 9100)


def test_a_config_token_may_name_an_environment_variable() -> None:
    config = GatewayConfig(auth=GatewayAuthConfig(token="${MY_GATEWAY_SECRET}"))
    assert resolve_settings(config, {"MY_GATEWAY_SECRET": "s3cret"}).token == "s3cret"
    with pytest.raises(ConfigError) as raised:
        resolve_settings(config, {})
    assert "MY_GATEWAY_SECRET" in str(raised.value)


@pytest.mark.parametrize("bind", ["lan", "0.0.0.0", "192.168.1.20", "::"])
def test_binding_beyond_loopback_without_a_token_is_refused(bind: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_settings(GatewayConfig(), {}, bind=bind)
    assert "without a token" in str(raised.value)
    assert resolve_settings(GatewayConfig(), {}, bind=bind, token="t").token == "t"


def test_lan_url_for_local_clients_goes_through_loopback() -> None:
    settings = resolve_settings(GatewayConfig(), {}, bind="lan", token="t", port=1234)
    assert settings.url == "http://127.0.0.1:1234" and not settings.loopback_only


def test_limits_default_to_8_mib_30_s_5_s_and_1000_connections() -> None:
    settings = resolve_settings(GatewayConfig(), {})
    assert settings.max_body_bytes == 8 * 1024 * 1024
    assert settings.request_timeout_seconds == 30.0
    assert settings.keep_alive_seconds == 5.0
    assert settings.max_connections == 1000


def test_limits_come_from_the_gateway_section(tmp_path: Path) -> None:
    path = tmp_path / "nodmix.json"
    path.write_text(
        "{ gateway: { maxBodyBytes: 1048576, requestTimeoutSeconds: 5, "
        "keepAliveSeconds: 2, maxConnections: 50 } }",
        encoding="utf-8",
    )
    config = load_config(env={"NODMIX_CONFIG_PATH": str(path)}).config.gateway
    settings = resolve_settings(config, {})
    assert settings.max_body_bytes == 1048576 and settings.request_timeout_seconds == 5
    assert settings.keep_alive_seconds == 2 and settings.max_connections == 50


def test_a_zero_body_limit_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "nodmix.json"
    path.write_text("{ gateway: { maxBodyBytes: 0 } }", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"gateway\.maxBodyBytes"):
        load_config(env={"NODMIX_CONFIG_PATH": str(path)})
