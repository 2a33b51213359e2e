"""The context engine's subagent lifecycle through a real plugin engine: `prepare_subagent_spawn`
before a child's first turn (its rollback handle called when the spawn then fails),
`on_subagent_ended` when the run ends and again, as `swept`, when its session is archived."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from nodmix.subagents.recovery import sweep
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from tests.subagents.support import open_runtime, poll, records, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

RECORDING_ENGINE = '''
import json
from nodmix.context import sdk
from nodmix.context.base import AssembleResult, ContextEngineInfo
from nodmix.plugins import Plugin


class Recorder:
    """Passes history through unchanged and writes each subagent hook call to a file."""

    info = ContextEngineInfo(id="recorder", name="Recorder")

    def __init__(self, ctx):
        self.ctx = ctx
        self.log = ctx.config["log"]

    def _write(self, **record):
        with open(self.log, "a") as file:
            file.write(json.dumps(record) + "\\n")

    async def ingest(self, params):
        return None

    async def assemble(self, params):
        return AssembleResult(messages=list(params.messages), estimated_tokens=100)

    async def compact(self, params):
        return await sdk.delegate_compaction_to_runtime(self.ctx, params)

    async def prepare_subagent_spawn(self, params):
        if self.ctx.config.get("failPrepare"):
            raise RuntimeError("no room for another child")
        self._write(
            hook="prepare",
            parent=params.parent_session_key,
            child=params.child_session_key,
            mode=params.context_mode,
            files=list(params.transcript_files),
            ids=list(params.transcript_ids),
            ttl=params.ttl_seconds,
            run=params.run_id,
        )

        async def rollback():
            self._write(hook="rollback", child=params.child_session_key)

        return rollback

    async def on_subagent_ended(self, params):
        self._write(
            hook="ended",
            parent=params.parent_session_key,
            child=params.child_session_key,
            reason=params.reason,
            status=params.status,
            run=params.run_id,
        )


plugin = Plugin(
    id="recorder-plugin",
    name="Recording engine",
    register=lambda api: api.register_context_engine("recorder", Recorder),
)
'''


def _configure(state: Path, base_url: str, **engine: Any) -> Path:
    plugin = state / "recorder.py"
    plugin.write_text(RECORDING_ENGINE, encoding="utf-8")
    log = state / "hooks.jsonl"
    write_config(
        state,
        base_url,
        {"timeoutSeconds": 90},
        plugins={
            "load": {"paths": [str(plugin)]},
            "slots": {"contextEngine": "recorder"},
            "entries": {"recorder-plugin": {"config": {"log": str(log), **engine}}},
        },
    )
    return log


def _calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


async def test_prepare_runs_before_the_child_and_ended_after_it_then_swept_on_archive(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        log = _configure(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait: check the ferry times")
            parent = runtime.sessions.open("agent:main:main", create=False)
            await poll(
                lambda: [r.status for r in records(isolated_state)] == ["completed"],
                what="the record",
            )
            (run,) = records(isolated_state)
            archived = await sweep(runtime.subagents, now=time.time() + 61 * 60)
            gone = runtime.sessions.store("main").get(run.child_key) is None
    assert outcome.result.reply == "check the ferry times: done: check the ferry times"
    prepare, ended, swept = _calls(log)
    assert prepare == {
        "hook": "prepare",
        "parent": "agent:main:main",
        "child": run.child_key,
        "mode": "isolated",
        "files": [str(parent.transcript.path)],
        "ids": [parent.session_id],
        "ttl": 90.0,
        "run": run.run_id,
    }
    assert ended == {
        "hook": "ended",
        "parent": "agent:main:main",
        "child": run.child_key,
        "reason": "completed",
        "status": "completed",
        "run": run.run_id,
    }
    assert swept["hook"] == "ended" and swept["reason"] == "swept"
    assert archived == 1 and gone
    assert records(isolated_state)[0].archived


async def test_a_spawn_that_fails_after_preparation_hands_the_engine_its_rollback(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        log = _configure(isolated_state, server.base_url)
        (isolated_state / "subagents").mkdir()
        (isolated_state / "subagents" / "runs").write_text("not a folder", encoding="utf-8")
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn: write the report")
            children = [r for r in runtime.sessions.list_sessions("main") if r.entry.spawned_by]
            assert runtime.subagents.open_runs() == []
    assert children == []
    prepare, rollback = _calls(log)
    assert prepare["hook"] == "prepare" and rollback == {
        "hook": "rollback",
        "child": prepare["child"],
    }
    assert outcome.result.reply.startswith("sessions_spawn failed")


async def test_a_failing_prepare_fails_the_spawn_with_the_engine_named(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        log = _configure(isolated_state, server.base_url, failPrepare=True)
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait: write the report")
            children = [r for r in runtime.sessions.list_sessions("main") if r.entry.spawned_by]
    assert outcome.result.reply == (
        "context engine 'recorder' from plugin 'recorder-plugin' failed in "
        "prepare_subagent_spawn(): RuntimeError: no room for another child; fix or update "
        "the plugin, or set plugins.slots.contextEngine back to 'legacy' (it is 'recorder')"
    )
    assert _calls(log) == [] and children == [] and records(isolated_state) == []
