"""`channels.telegram.webhook` and `streaming`: checked at load with one line naming the file
and the key; the secret token may come from the environment and is checked once resolved."""

from __future__ import annotations

from typing import Any

import pytest

from nodmix.channels.registry import rules_for, webhook_paths
from nodmix.channels.telegram.adapter import telegram_settings
from nodmix.config.loader import validate
from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError


def _config(telegram: dict[str, Any], defaults: dict[str, Any] | None = None) -> NodmixConfig:
    channels: dict[str, Any] = {"telegram": {"botToken": "1:x", **telegram}}
    if defaults is not None:
        channels["defaults"] = defaults
    return validate({"channels": channels}, file="nodmix.json")


def _error(webhook: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        _config({"webhook": webhook})
    return caught.value


def test_the_webhook_path_defaults_to_the_path_of_the_url() -> None:
    config = _config({"webhook": {"url": "https://bot.example.org/tg/hook", "secretToken": "a"}})
    assert webhook_paths(config) == {"/tg/hook": "telegram"}
    config = _config(
        {"webhook": {"url": "https://bot.example.org/x", "secretToken": "a", "path": "/in/tg"}}
    )
    assert webhook_paths(config) == {"/in/tg": "telegram"}
    assert webhook_paths(_config({})) == {}


@pytest.mark.parametrize(
    ("webhook", "key", "says"),
    [
        ({"url": "http://bot.example.org/tg", "secretToken": "a"}, "webhook.url", "https"),
        ({"url": "bot.example.org/tg", "secretToken": "a"}, "webhook.url", "absolute"),
        ({"url": "https://bot.example.org/", "secretToken": "a"}, "webhook.url", "path"),
        (
            {"url": "https://b.example.org/t", "secretToken": "no spaces"},
            "webhook.secretToken",
            "A-Z",
        ),
        (
            {"url": "https://b.example.org/t", "secretToken": "x" * 257},
            "webhook.secretToken",
            "1-256",
        ),
        ({"url": "https://b.example.org/t", "secretToken": ""}, "webhook.secretToken", "1-256"),
        (
            {"url": "https://b.example.org/t", "secretToken": "a", "path": "up"},
            "webhook.path",
            "path",
        ),
        (
            {"url": "https://b.example.org/t", "secretToken": "a", "path": "/a/../v1"},
            "webhook.path",
            "",
        ),
    ],
)
def test_a_bad_webhook_is_one_line_naming_file_and_key(
    webhook: dict[str, Any], key: str, says: str
) -> None:
    error = _error(webhook)
    message = str(error)
    assert message.startswith(f"nodmix.json: channels.telegram.{key}: ")
    assert says in message and "\n" not in message


def test_plain_http_is_allowed_for_a_loopback_webhook() -> None:
    for host in ("127.0.0.1:8443", "localhost", "[::1]:8443"):
        _config({"webhook": {"url": f"http://{host}/tg", "secretToken": "a"}})


def test_the_secret_token_comes_from_the_environment_and_is_checked_there() -> None:
    section = _config({"webhook": {"url": "https://b.example.org/t", "secretToken": "${TG_S}"}})
    assert section.channels.telegram is not None
    settings = telegram_settings(section.channels.telegram, {"TG_S": "from-env_1"})
    assert settings.webhook is not None and settings.webhook.secret_token == "from-env_1"
    assert settings.webhook.path == "/t"
    with pytest.raises(ConfigError) as caught:
        telegram_settings(section.channels.telegram, {"TG_S": "bad token!"})
    assert caught.value.key == "channels.telegram.webhook.secretToken"
    with pytest.raises(ConfigError) as caught:
        telegram_settings(section.channels.telegram, {})
    assert "TG_S" in str(caught.value)


def test_streaming_is_off_unless_the_channel_or_the_defaults_say_edit() -> None:
    assert rules_for(_config({}), "telegram").streaming == "off"
    assert rules_for(_config({}, {"streaming": "edit"}), "telegram").streaming == "edit"
    config = _config({"streaming": "off"}, {"streaming": "edit"})
    assert rules_for(config, "telegram").streaming == "off"
    with pytest.raises(ConfigError) as caught:
        _config({"streaming": "typewriter"})
    assert caught.value.key == "channels.telegram.streaming"
