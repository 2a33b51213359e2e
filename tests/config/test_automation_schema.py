"""The `automation`, `hooks` and `agents.defaults.heartbeat` keys: bad values are one line
naming the file and the dotted key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.config.loader import load_config
from nodmix.errors import ConfigError


def _load(state: Path, config: dict[str, object]) -> object:
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return load_config(path).config


def test_valid_automation_sections_load(isolated_state: Path) -> None:
    config = _load(
        isolated_state,
        {
            "automation": {"maxConcurrentRuns": 3, "missedRuns": "skip"},
            "channels": {"telegram": {"botToken": "123:abc", "allowFrom": [1]}},
            "hooks": {
                "mappings": {"mail": {"message": "{{body.subject}}", "deliver": "telegram:1"}}
            },
            "agents": {
                "defaults": {
                    "heartbeat": {
                        "every": "1h30m",
                        "activeHours": {"start": "8:00", "end": "22:30"},
                    }
                }
            },
        },
    )
    assert config.automation.max_concurrent_runs == 3  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (
            {"agents": {"defaults": {"heartbeat": {"every": "soon"}}}},
            "agents.defaults.heartbeat.every",
        ),
        (
            {
                "agents": {
                    "defaults": {"heartbeat": {"activeHours": {"start": "25:00", "end": "1:00"}}}
                }
            },
            "agents.defaults.heartbeat.activeHours.start",
        ),
        (
            {"hooks": {"mappings": {"m": {"message": "x", "deliver": "4242"}}}},
            "hooks.mappings.m.deliver",
        ),
        ({"hooks": {"mappings": {"m": {}}}}, "hooks.mappings.m"),
        (  # a channel that is not configured
            {"hooks": {"mappings": {"m": {"message": "x", "deliver": "slack:C1"}}}},
            "hooks.mappings.m.deliver",
        ),
        (
            {
                "channels": {"telegram": {"botToken": "123:abc", "enabled": False}},
                "hooks": {"mappings": {"m": {"message": "x", "deliver": "telegram:1"}}},
            },
            "hooks.mappings.m.deliver",
        ),
        (
            {"agents": {"defaults": {"heartbeat": {"every": "1h", "deliver": "discord:1"}}}},
            "agents.defaults.heartbeat.deliver",
        ),
        ({"automation": {"missedRuns": "always"}}, "automation.missedRuns"),
        ({"automation": {"maxConcurrentRuns": 0}}, "automation.maxConcurrentRuns"),
    ],
)
def test_bad_values_name_the_file_and_the_key(
    isolated_state: Path, config: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(isolated_state, config)
    message = str(caught.value)
    assert "nodmix.json" in message and key in message and "\n" not in message
