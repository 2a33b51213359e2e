"""A `nodmix.json` with the default agent on a scripted model and any channel sections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_config(state: Path, model_url: str, channels: dict[str, Any], **top: Any) -> Path:
    """Write `state/nodmix.json`; `channels` is the `channels` section."""
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": model_url,
                    "apiKey": "none",
                    "models": [{"id": "scripted", "contextWindow": 32000}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        "channels": channels,
        **top,
    }
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path
