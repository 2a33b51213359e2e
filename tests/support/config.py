"""`nodmix.json` files whose default agent talks to a scripted model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_config(
    state: Path,
    base_url: str,
    extra: str = "",
    *,
    agents: str = "",
    providers: str = "",
    defaults: str = "",
) -> Path:
    """A JSON5 config whose default model is `local/scripted` at `base_url`.

    `extra` adds top-level sections, `agents` keys of the `agents` section, `defaults` keys of
    `agents.defaults` besides its model, and `providers` more entries of `models.providers`
    (all as JSON5 text).
    """
    provider = (
        f"local: {{ api: 'openai-completions', baseUrl: '{base_url}', "
        "apiKey: 'sk-test-secret-key', "
        "models: [{ id: 'scripted', contextWindow: 32000, maxTokens: 2048 }] }"
    )
    path = state / "nodmix.json"
    path.write_text(
        f"{{ models: {{ providers: {{ {provider}, {providers} }} }}, "
        f"agents: {{ defaults: {{ model: {{ primary: 'local/scripted' }}, {defaults} }}, "
        f"{agents} }}, "
        f"{extra} }}",
        encoding="utf-8",
    )
    return path


def scripted_config(base_url: str, **top: Any) -> dict[str, Any]:
    """The same config as a dict; `top` adds top-level sections."""
    return {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": base_url,
                    "apiKey": "none",
                    "models": [{"id": "scripted", "contextWindow": 32000}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        **top,
    }


def write_json_config(state: Path, base_url: str, **top: Any) -> Path:
    """`scripted_config` written as plain JSON to `state/nodmix.json`."""
    path = state / "nodmix.json"
    path.write_text(json.dumps(scripted_config(base_url, **top)), encoding="utf-8")
    return path
