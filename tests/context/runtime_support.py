"""Config and plugin files for runtime-level context tests (real plugins, a real model socket)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TINY_ENGINE_PLUGIN = '''
from nodmix.context import sdk
from nodmix.context.base import AssembleResult, ContextEngineInfo
from nodmix.messages import TextBlock, UserMessage
from nodmix.plugins import Plugin


class TinyEngine:
    """Sends only the newest user message, tagged, and delegates compaction."""

    info = ContextEngineInfo(id="tiny", name="Tiny", version="1.2")

    def __init__(self, ctx):
        self.ctx = ctx

    async def ingest(self, params):
        return None

    async def assemble(self, params):
        users = [m for m in params.messages if m.role == "user"]
        text = "[tiny] " + (users[-1].text if users else "")
        tag = self.ctx.config.get("tag", "TINY ENGINE ACTIVE")
        return AssembleResult(
            messages=[UserMessage(content=(TextBlock(text=text),))],
            estimated_tokens=len(text) // 4 + 1,
            system_prompt_addition=tag,
        )

    async def compact(self, params):
        return await sdk.delegate_compaction_to_runtime(self.ctx, params)


def register(api):
    api.register_context_engine("tiny", TinyEngine)


plugin = Plugin(id="tiny-plugin", name="Tiny engine", version="1.2", register=register)
'''

BROKEN_ENGINE_PLUGIN = """
from nodmix.context.base import ContextEngineInfo
from nodmix.plugins import Plugin


class Broken:
    info = ContextEngineInfo(id="broken", name="Broken")

    def __init__(self, ctx):
        pass

    async def ingest(self, params):
        return None

    async def assemble(self, params):
        return {"messages": list(params.messages)}

    async def compact(self, params):
        return None


plugin = Plugin(
    id="broken-plugin",
    name="Broken engine",
    register=lambda api: api.register_context_engine("broken", Broken),
)
"""


def write_config(state: Path, base_url: str, **sections: Any) -> Path:
    """`nodmix.json` pointing the main agent at the scripted server (plain JSON)."""
    config: dict[str, Any] = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": base_url,
                    "apiKey": "test",
                    "models": [{"id": "scripted", "contextWindow": 6000, "maxTokens": 1024}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        "tools": {"deny": ["web_fetch", "exec"]},
    }
    for key, value in sections.items():
        if key == "compaction":
            config["agents"]["defaults"]["compaction"] = value
        elif key == "window":
            config["models"]["providers"]["local"]["models"][0]["contextWindow"] = value
        else:
            config[key] = value
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def plugin_file(directory: Path, name: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    return path
