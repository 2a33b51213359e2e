"""Discord and Slack settings: tokens from the section, `${VAR}` or the environment, and one
clear error naming the key when one is missing."""

from __future__ import annotations

import pytest

from nodmix.channels.discord.adapter import discord_settings
from nodmix.channels.slack.adapter import slack_settings
from nodmix.config.channel_schema import DiscordConfig, SlackConfig
from nodmix.errors import ConfigError


def test_discord_token_comes_from_the_environment_when_unset() -> None:
    settings = discord_settings(DiscordConfig(guilds=[1, "2"]), {"DISCORD_BOT_TOKEN": "abc"})
    assert settings.token == "abc" and settings.guilds == frozenset({"1", "2"})
    assert settings.api_base_url == "https://discord.com/api/v10"


def test_discord_without_a_token_names_the_key() -> None:
    with pytest.raises(ConfigError) as error:
        discord_settings(DiscordConfig(), {})
    assert "channels.discord.token" in str(error.value)


def test_slack_tokens_resolve_variables() -> None:
    section = SlackConfig(bot_token="${MY_BOT}", app_token="xapp-1")
    settings = slack_settings(section, {"MY_BOT": "xoxb-1"})
    assert (settings.bot_token, settings.app_token, settings.mode) == ("xoxb-1", "xapp-1", "socket")
    assert settings.api_base_url == "https://slack.com/api/"


def test_socket_mode_without_an_app_token_names_the_key() -> None:
    with pytest.raises(ConfigError) as error:
        slack_settings(SlackConfig(bot_token="xoxb-1"), {})
    assert "channels.slack.appToken" in str(error.value)


def test_http_mode_needs_the_signing_secret_not_the_app_token() -> None:
    with pytest.raises(ConfigError) as error:
        slack_settings(SlackConfig(bot_token="xoxb-1", mode="http"), {})
    assert "channels.slack.signingSecret" in str(error.value)
    settings = slack_settings(
        SlackConfig(bot_token="xoxb-1", mode="http"), {"SLACK_SIGNING_SECRET": "s"}
    )
    assert settings.signing_secret == "s" and settings.http_port == 3000
