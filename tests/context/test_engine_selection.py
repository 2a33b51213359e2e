"""Selecting a context engine through `plugins.slots.contextEngine`, with real plugins."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nodmix.config import load_config
from nodmix.context.status import context_engine_status
from nodmix.errors import PluginError
from nodmix.plugins.slots import reset_slots_for_plugin
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer

from .runtime_support import BROKEN_ENGINE_PLUGIN, TINY_ENGINE_PLUGIN, plugin_file, write_config

pytestmark = pytest.mark.anyio


def answer(request: ModelRequest) -> ModelReply:
    return ModelReply.text("answered")


async def test_the_selected_plugin_engine_assembles_what_the_model_receives(
    isolated_state: Path,
) -> None:
    plugin = plugin_file(isolated_state / "plugins", "tiny", TINY_ENGINE_PLUGIN)
    async with ScriptedModelServer(answer) as server:
        write_config(
            isolated_state,
            server.base_url,
            plugins={
                "load": {"paths": [str(plugin)]},
                "slots": {"contextEngine": "tiny"},
                "entries": {"tiny-plugin": {"config": {"tag": "TAG-FROM-CONFIG"}}},
            },
        )
        async with Runtime.open() as runtime:
            with anyio.fail_after(10):
                await runtime.run_turn("first question")
                await runtime.run_turn("second question")
            status = context_engine_status(runtime)
        body = server.requests[-1].body
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "[tiny] second question"
    assert messages[0]["content"].startswith("TAG-FROM-CONFIG")
    assert status == {
        "slot": "tiny",
        "engineId": "tiny",
        "owner": "tiny-plugin",
        "registered": ["legacy", "tiny"],
        "ok": True,
        "error": None,
        "name": "Tiny",
        "version": "1.2",
        "ownsCompaction": False,
    }


async def test_an_unregistered_engine_fails_the_run_with_the_fix(isolated_state: Path) -> None:
    write_config(
        isolated_state, "http://127.0.0.1:9/v1", plugins={"slots": {"contextEngine": "lossless"}}
    )
    async with Runtime.open() as runtime:
        with pytest.raises(PluginError) as caught:
            await runtime.run_turn("hi")
        status = context_engine_status(runtime)
    text = str(caught.value)
    assert "'lossless'" in text and "set the slot back to 'legacy'" in text
    assert status["ok"] is False and status["error"] == text and status["owner"] is None


async def test_an_engine_breaking_its_contract_fails_the_run_and_doctor_sees_it(
    isolated_state: Path,
) -> None:
    plugin = plugin_file(isolated_state / "plugins", "broken", BROKEN_ENGINE_PLUGIN)
    async with ScriptedModelServer(answer) as server:
        write_config(
            isolated_state,
            server.base_url,
            plugins={"load": {"paths": [str(plugin)]}, "slots": {"contextEngine": "broken"}},
        )
        async with Runtime.open() as runtime:
            with pytest.raises(PluginError) as caught:
                await runtime.run_turn("hi")
            status = context_engine_status(runtime)
        assert server.requests == []
    assert "'broken'" in str(caught.value) and "'broken-plugin'" in str(caught.value)
    assert "returned dict, not AssembleResult" in str(caught.value)
    assert status["ok"] is False and "returned dict" in status["error"]


async def test_legacy_is_the_default_engine(isolated_state: Path) -> None:
    write_config(isolated_state, "http://127.0.0.1:9/v1")
    async with Runtime.open() as runtime:
        status = context_engine_status(runtime)
    assert status["engineId"] == "legacy" and status["owner"] == "core" and status["ok"]


def test_disabling_the_plugin_that_provides_the_selected_engine_resets_the_slot(
    isolated_state: Path,
) -> None:
    plugin = plugin_file(isolated_state / "plugins", "tiny", TINY_ENGINE_PLUGIN)
    write_config(
        isolated_state,
        "http://127.0.0.1:9/v1",
        plugins={"load": {"paths": [str(plugin)]}, "slots": {"contextEngine": "tiny"}},
    )
    loaded = load_config()
    doc, resets = reset_slots_for_plugin(loaded, dict(loaded.raw), "tiny-plugin")
    assert [(r.slot.key, r.was) for r in resets] == [("plugins.slots.contextEngine", "tiny")]
    assert doc["plugins"]["slots"]["contextEngine"] == "legacy"
    same, none = reset_slots_for_plugin(loaded, dict(loaded.raw), "notes")
    assert none == [] and same["plugins"]["slots"]["contextEngine"] == "tiny"


DIRS_ENGINE_PLUGIN = """
from nodmix.context.base import AssembleResult, ContextEngineInfo
from nodmix.plugins import Plugin

CREATED = []


class DirsEngine:
    info = ContextEngineInfo(id="dirs", name="Dirs")

    def __init__(self, ctx):
        self.ctx = ctx
        CREATED.append(ctx.agent_dir.name)

    async def ingest(self, params):
        return None

    async def assemble(self, params):
        return AssembleResult(
            messages=list(params.messages),
            estimated_tokens=10,
            system_prompt_addition=(
                f"agentDir={self.ctx.agent_dir} workspaceDir={self.ctx.workspace_dir} "
                f"created={','.join(CREATED)}"
            ),
        )

    async def compact(self, params):
        return None


def register(api):
    api.register_context_engine("dirs", DirsEngine)


plugin = Plugin(id="dirs-plugin", name="Dirs", register=register)
"""


async def test_an_engine_factory_gets_each_agents_own_directory_and_workspace(
    isolated_state: Path,
) -> None:
    plugin = plugin_file(isolated_state / "plugins", "dirs", DIRS_ENGINE_PLUGIN)
    async with ScriptedModelServer(answer) as server:
        write_config(
            isolated_state,
            server.base_url,
            window=200_000,
            plugins={"load": {"paths": [str(plugin)]}, "slots": {"contextEngine": "dirs"}},
            agents={
                "defaults": {"model": {"primary": "local/scripted"}},
                "list": [{"id": "main"}, {"id": "ops", "workspace": str(isolated_state / "ops")}],
            },
        )
        async with Runtime.open() as runtime:
            with anyio.fail_after(10):
                await runtime.run_turn("hi", agent_id="main")
                await runtime.run_turn("hi", agent_id="ops")
                await runtime.run_turn("again", agent_id="main")
        systems = [r.body["messages"][0]["content"] for r in server.requests]
    agents, workspace = isolated_state / "agents", isolated_state / "workspace"
    main = f"agentDir={agents / 'main'} workspaceDir={workspace}"
    ops = f"agentDir={agents / 'ops'} workspaceDir={isolated_state / 'ops'}"
    assert systems[0].startswith(main + " created=main")
    assert systems[1].startswith(ops + " created=main,ops")
    assert systems[2].startswith(main + " created=main,ops")  # cached per agent, not rebuilt
