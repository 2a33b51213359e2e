"""`plugins.slots.memory`: a plugin's memory backend answers `memory_search`/`memory_get` in
place of the built-in index, with real plugins, real turns and the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from nodmix.messages import ToolResultMessage
from nodmix.origin import TurnOrigin
from nodmix.runtime.core import Runtime
from nodmix.testing.model_server import ScriptedModelServer
from tests.context.runtime_support import plugin_file, write_config
from tests.memory.support import write_notes
from tests.memory.test_runtime_memory import calls_then_reports
from tests.support.cli import run_nodmix

FACTS_PLUGIN = '''
import json

from nodmix.memory.base import MemoryInfo, MemorySearchResult, MemoryText
from nodmix.memory.results import SearchHit
from nodmix.plugins import Plugin


class Facts:
    """Facts from the plugin's config, plus where it was told to keep its state."""

    info = MemoryInfo(id="facts", name="Facts store", version="2")

    def __init__(self, ctx):
        self.ctx = ctx
        self.facts = dict(ctx.config.get("facts", {}))

    async def search(self, params):
        words = params.query.lower().split()
        hits = [
            SearchHit(path=f"facts/{key}", start_line=1, end_line=1, score=0.9, snippet=text,
                      source="facts")
            for key, text in self.facts.items()
            if any(w in text.lower() for w in words)
        ]
        hits.append(SearchHit(path="sessions/old.jsonl", start_line=1, end_line=1, score=0.5,
                              snippet="a past conversation", source="sessions"))
        return MemorySearchResult(hits=hits[: params.max_results], mode="facts",
                                  warning=f"agentDir={self.ctx.agent_dir.name}")

    async def read(self, params):
        key = params.path.removeprefix("facts/")
        if key not in self.facts:
            raise FileNotFoundError(params.path)
        return MemoryText(text=self.facts[key], first=1, last=1)


class Broken:
    info = MemoryInfo(id="broken", name="Broken")

    def __init__(self, ctx):
        pass

    async def search(self, params):
        return {"hits": []}

    async def read(self, params):
        raise RuntimeError("disk on fire")


def register(api):
    api.register_memory("facts", Facts)
    api.register_memory("broken", Broken)


plugin = Plugin(id="facts-plugin", name="Facts memory", register=register)
'''

FACTS = {"dentist": "The dentist appointment is on Tuesday at 14:30.", "cat": "The cat is Miso."}


def _config(state: Path, base_url: str, slot: str | None) -> None:
    plugin = plugin_file(state / "plugins", "facts", FACTS_PLUGIN)
    plugins: dict[str, Any] = {
        "load": {"paths": [str(plugin)]},
        "entries": {"facts-plugin": {"config": {"facts": FACTS}}},
    }
    if slot is not None:
        plugins["slots"] = {"memory": slot}
    write_config(state, base_url, plugins=plugins)


def _tool_results(server: ScriptedModelServer) -> list[ToolResultMessage]:
    last = server.requests[-1].request
    assert last is not None
    return [m for m in last.messages if isinstance(m, ToolResultMessage)]


@pytest.mark.anyio
async def test_the_selected_plugin_answers_memory_search_and_memory_get(
    isolated_state: Path,
) -> None:
    write_notes(isolated_state / "workspace")  # the built-in index would find these instead
    respond = calls_then_reports(
        ("memory_search", {"query": "dentist"}),
        ("memory_get", {"path": "facts/dentist"}),
        ("memory_get", {"path": "facts/unknown"}),
    )
    async with ScriptedModelServer(respond) as server:
        _config(isolated_state, server.base_url, "facts")
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                await runtime.run_turn("when is the dentist?")
                search, get, missing = _tool_results(server)
                # A chat that does not speak for the owner sees none of the owner's memory,
                # whichever backend holds it; one memory.shareWith names never sees past
                # sessions.
                group = TurnOrigin(channel="telegram", chat_id="-100", chat_type="group")
                await runtime.run_turn("dentist?", session_key="agent:main:group", origin=group)
                group_search = _tool_results(server)[0]
                shared = msgspec.structs.replace(group, chat_id="-200", memory=True)
                await runtime.run_turn("dentist?", session_key="agent:main:shared", origin=shared)
                shared_search = _tool_results(server)[0]
    payload = json.loads(search.text)
    assert payload["mode"] == "facts" and payload["warning"] == "agentDir=main"
    assert [r["path"] for r in payload["results"]] == ["facts/dentist", "sessions/old.jsonl"]
    assert get.text == "facts/dentist lines 1-1\nThe dentist appointment is on Tuesday at 14:30."
    assert missing.text == "'facts/unknown' is not in memory; use a path memory_search returned."
    assert json.loads(group_search.text)["results"] == []
    assert [r["path"] for r in json.loads(shared_search.text)["results"]] == ["facts/dentist"]


@pytest.mark.anyio
async def test_a_missing_or_broken_backend_fails_the_tool_call_with_the_fix(
    isolated_state: Path,
) -> None:
    respond = calls_then_reports(("memory_search", {"query": "cat"}))
    async with ScriptedModelServer(respond) as server:
        _config(isolated_state, server.base_url, "broken")
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                await runtime.run_turn("the cat?")
                broken = _tool_results(server)[-1]
        _config(isolated_state, server.base_url, "nowhere")
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                await runtime.run_turn("the cat?")
                missing = _tool_results(server)[-1]
    assert broken.text.startswith("memory search is unavailable: memory backend 'broken'")
    assert "from plugin 'facts-plugin'" in broken.text
    assert "returned dict, not MemorySearchResult" in broken.text
    assert "'nowhere' (plugins.slots.memory) is not registered" in missing.text
    assert "set the slot back to 'builtin'" in missing.text


def test_cli_search_doctor_and_disable_follow_the_memory_slot(isolated_state: Path) -> None:
    _config(isolated_state, "http://127.0.0.1:9/v1", "facts")
    found = run_nodmix(isolated_state, "memory", "search", "cat", "--json")
    assert found.returncode == 0, found.stderr
    assert [h["path"] for h in json.loads(found.stdout)][0] == "facts/cat"
    status = run_nodmix(isolated_state, "memory", "status")
    assert "backend:   facts (plugins.slots.memory" in status.stdout

    doctor = run_nodmix(isolated_state, "doctor", "--offline", "--json")
    memory = next(c for c in json.loads(doctor.stdout) if c["name"] == "memory")
    assert memory["level"] == "ok" and memory["detail"] == "facts (from facts-plugin)"

    disabled = run_nodmix(isolated_state, "plugins", "disable", "facts-plugin")
    assert disabled.returncode == 0, disabled.stderr
    assert "plugins.slots.memory was 'facts' (this plugin's); reset to 'builtin'" in (
        disabled.stdout
    )
    config = json.loads((isolated_state / "nodmix.json").read_text(encoding="utf-8"))
    assert config["plugins"]["slots"]["memory"] == "builtin"
    doctor = run_nodmix(isolated_state, "doctor", "--offline", "--json")
    memory = next(c for c in json.loads(doctor.stdout) if c["name"] == "memory")
    assert memory["level"] == "ok" and memory["detail"] == "builtin (from core)"
