"""Skills in a long-lived runtime: picked up between turns without a restart, and reachable from
code-mode programs as `skills.list()` / `skills.read(name)` in the real sandbox."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from nodmix.config import load_config
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer
from tests.skills.support import write_skill

pytestmark = pytest.mark.integration


def _config(state: Path, base_url: str, **extra: Any) -> Path:
    config: dict[str, Any] = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": base_url,
                    "apiKey": "test-key",
                    "models": [{"id": "scripted"}],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        **extra,
    }
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _system(server: ScriptedModelServer) -> str:
    return str(server.requests[-1].body["messages"][0]["content"])


@pytest.mark.anyio
async def test_skill_added_edited_and_removed_between_turns_shows_in_the_next_prompt(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(lambda r: ModelReply.text("ok")) as server:
        path = _config(isolated_state, server.base_url)
        env = {**os.environ, "NODMIX_STATE_DIR": str(isolated_state)}
        async with Runtime.open(load_config(path), env=env) as runtime:
            skills = runtime.agent("main").workspace / "skills"
            await runtime.run_turn("one")
            assert "- fresh:" not in _system(server)

            skill_file = write_skill(skills, "fresh", "Brand new procedure.")
            await runtime.run_turn("two")
            assert "skills/:\n- fresh: Brand new procedure." in _system(server)

            skill_file.write_text(
                "---\nname: fresh\ndescription: Edited procedure.\n---\n", encoding="utf-8"
            )
            await runtime.run_turn("three")
            assert "- fresh: Edited procedure." in _system(server)

            skill_file.unlink()
            await runtime.run_turn("four")
            assert "- fresh:" not in _system(server)


@pytest.mark.anyio
async def test_code_mode_program_lists_and_reads_skills_without_the_list_in_exec(
    isolated_state: Path,
) -> None:
    program = (
        "const all = await skills.list();\n"
        "const one = await skills.read('trip');\n"
        "let missing = null;\n"
        "try { await skills.read('nope'); } catch (e) { missing = String(e.message); }\n"
        "return { names: all.map(s => s.name), content: one.content, missing };"
    )
    results: list[dict[str, Any]] = []

    def model(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            results.append(json.loads(last.text))
            return ModelReply.text("done")
        return ModelReply.tool_call("exec", {"code": program})

    async with ScriptedModelServer(model) as server:
        path = _config(isolated_state, server.base_url, tools={"codeMode": {"enabled": True}})
        env = {**os.environ, "NODMIX_STATE_DIR": str(isolated_state)}
        async with Runtime.open(load_config(path), env=env) as runtime:
            skills = runtime.agent("main").workspace / "skills"
            write_skill(skills, "trip", "Plan a trip.", body="Check the ferry first.\n")
            outcome = await runtime.run_turn("plan my trip")
    assert outcome.result.reply == "done"
    value = results[0]["value"]
    assert "trip" in value["names"]
    assert "daily-note" in value["names"]
    assert value["content"] == "Check the ferry first."
    assert "no skill named 'nope'" in value["missing"]
    body = server.requests[0].body
    assert sorted(t["function"]["name"] for t in body["tools"]) == ["exec", "wait"]
    exec_description = next(
        t["function"]["description"] for t in body["tools"] if t["function"]["name"] == "exec"
    )
    assert "`skills`" in exec_description
    assert "Plan a trip" not in exec_description
    assert "skills/:\n- trip: Plan a trip." in _system(server)
    assert "skills.list()" in _system(server)


@pytest.mark.anyio
async def test_skill_entry_env_offers_the_skill_and_reaches_its_commands(
    isolated_state: Path,
) -> None:
    seen: list[str] = []

    def model(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            seen.append(last.text)
            return ModelReply.text("done")
        return ModelReply.tool_call("exec", {"command": 'printf "token=%s" "$TRIP_TOKEN"'})

    async with ScriptedModelServer(model) as server:
        path = _config(
            isolated_state,
            server.base_url,
            skills={"entries": {"trip": {"env": {"TRIP_TOKEN": "t-123"}}}},
        )
        env = {k: v for k, v in os.environ.items() if k != "TRIP_TOKEN"}
        env["NODMIX_STATE_DIR"] = str(isolated_state)
        async with Runtime.open(load_config(path), env=env) as runtime:
            write_skill(
                runtime.agent("main").workspace / "skills",
                "trip",
                "Plan a trip.",
                metadata="metadata:\n  nodmix:\n    requires:\n      env: [TRIP_TOKEN]\n",
            )
            await runtime.run_turn("plan")
    assert "- trip: Plan a trip." in str(server.requests[0].body["messages"][0]["content"])
    assert "token=t-123" in seen[0]


@pytest.mark.anyio
async def test_a_malformed_skill_is_skipped_with_a_warning_and_the_turn_goes_on(
    isolated_state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with ScriptedModelServer(lambda r: ModelReply.text("fine")) as server:
        path = _config(isolated_state, server.base_url)
        env = {**os.environ, "NODMIX_STATE_DIR": str(isolated_state)}
        async with Runtime.open(load_config(path), env=env) as runtime:
            skills = runtime.agent("main").workspace / "skills"
            write_skill(skills, "good", "Still offered.")
            broken = skills / "broken" / "SKILL.md"
            broken.parent.mkdir()
            broken.write_text("---\nname: broken\ndescription: [unclosed\n---\n", encoding="utf-8")
            with caplog.at_level("WARNING", logger="nodmix.skills"):
                outcome = await runtime.run_turn("hi")
    assert outcome.result.reply == "fine"
    assert "- good: Still offered." in _system(server)
    assert "broken" not in _system(server)
    warnings = [r.getMessage() for r in caplog.records if r.name == "nodmix.skills"]
    assert len(warnings) == 1 and str(broken) in warnings[0]
