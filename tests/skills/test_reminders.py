"""The bundled `reminders` skill: offered when the agent may use `cron`, and followed by a
scripted model in real turns it sets a one-shot reminder that fires on the scheduler and is
delivered to the chat it was asked from, sets a repeating one, lists and cancels."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.automation.clock import ManualClock
from nodmix.automation.scheduler import Scheduler
from nodmix.config.loader import validate
from nodmix.messages import ToolResultMessage
from nodmix.origin import TurnOrigin
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.skills import BUNDLED_DIR, SkillBook
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import last_user_text
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import open_runner, poll, telegram_section, write_config

OWNER = 4242
ONE_SHOT = "Remind the user to call Anna about the flat. Reply with one short line."
WEEKLY = "Remind the user to put the bins out. Reply with one short line."


def _verdicts(tmp_path: Path, raw: dict[str, Any]) -> dict[str, tuple[bool, tuple[str, ...]]]:
    review = SkillBook(state_dir=tmp_path).review(
        validate(raw, file="nodmix.json"),
        raw_config=raw,
        config_dir=tmp_path,
        agent_id="main",
        workspace=tmp_path / "ws",
        env={},
    )
    return {s.skill.name: (s.eligible, s.reasons) for s in review.statuses}


def test_the_reminders_skill_is_offered_only_when_the_agent_may_use_cron(tmp_path: Path) -> None:
    assert _verdicts(tmp_path, {})["reminders"] == (True, ())
    assert _verdicts(tmp_path, {"tools": {"allow": ["group:core"]}})["reminders"][0]
    blocked = "tool cron is not available to this agent (tools.allow / tools.deny)"
    for raw in (
        {"tools": {"deny": ["cron"]}},
        {"tools": {"allow": ["read", "exec"]}},
        {"agents": {"list": [{"id": "main", "tools": {"deny": ["cron"]}}]}},
    ):
        eligible, reasons = _verdicts(tmp_path, raw)["reminders"]
        assert not eligible and reasons == (blocked,), raw
    assert _verdicts(tmp_path, {"tools": {"deny": ["cron"]}})["daily-note"] == (True, ())


class FollowsTheSkill:
    """A model that does what the skill says: reads `SKILL.md` from the path its system prompt
    gives, then calls `cron` as the skill's steps describe."""

    def __init__(self) -> None:
        self.skill_text = ""
        self.listing = ""
        self.read_path = ""

    def __call__(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        asked = last_user_text(request) or ""
        if asked in (ONE_SHOT, WEEKLY):  # a job's run, in its own fresh session
            return ModelReply.text("Time to call Anna about the flat.")
        if isinstance(last, ToolResultMessage):
            return self._after(last.text, asked)
        folder = re.search(r"^(\S+)/:\n(?:- .*\n)*?- reminders: ", request.system, re.M)
        assert folder is not None, request.system
        self.read_path = f"{folder.group(1)}/reminders/SKILL.md"
        return ModelReply.tool_call("read", {"path": self.read_path})

    def _after(self, result: str, asked: str) -> ModelReply:
        if result.startswith("---\nname: reminders") or "# Reminders" in result:
            self.skill_text = result
            assert '`action: "add"`' in result and '`action: "remove"`' in result
            if asked.startswith("remind me in 20 minutes"):
                args = {"action": "add", "name": "call anna", "in": "20m", "message": ONE_SHOT}
            elif asked.startswith("every monday"):
                args = {"action": "add", "name": "bins", "cron": "0 8 * * 1", "message": WEEKLY}
            else:
                args = {"action": "list"}
            return ModelReply.tool_call("cron", args)
        if result.startswith("scheduled job"):
            return ModelReply.text(f"Done: {result}")
        if asked.startswith("cancel the bins"):
            if result.startswith("removed job"):
                return ModelReply.text("Cancelled the bins reminder.")
            self.listing = result
            job_id = next(line.split()[0] for line in result.splitlines() if " bins " in line)
            return ModelReply.tool_call("cron", {"action": "remove", "id": job_id})
        self.listing = result
        return ModelReply.text(result)


@pytest.mark.anyio
async def test_following_the_skill_a_reminder_fires_and_reaches_the_chat_it_came_from(
    isolated_state: Path,
) -> None:
    script = FollowsTheSkill()
    dm = TurnOrigin(channel="telegram", chat_id=str(OWNER), sender_id=str(OWNER))
    with ScriptedBotAPI() as api:
        async with ScriptedModelServer(script) as model:
            channels = telegram_section(api, dmPolicy="allowlist", allowFrom=[OWNER])
            config = write_config(isolated_state, model.base_url, channels=channels)
            clock = ManualClock(time.time())  # jobs are made on real time; it catches up below
            async with open_runner(isolated_state, config, clock) as (runtime, runner):

                async def say(text: str) -> str:
                    outcome = await runtime.run_turn(text, origin=dm)
                    return outcome.result.reply

                reply = await say("remind me in 20 minutes to call Anna about the flat")
                assert reply.startswith("Done: scheduled job") and "telegram:4242" in reply
                assert "## Setting a one-shot reminder" in script.skill_text
                assert Path(script.read_path).expanduser().parent.parent == BUNDLED_DIR
                reply = await say("every monday at 8 remind me to put the bins out")
                assert reply.startswith("Done: scheduled job") and "cron 0 8 * * 1" in reply
                listed = await say("what reminders do I have?")
                assert "call anna" in listed and "bins" in listed
                assert await say("cancel the bins reminder") == "Cancelled the bins reminder."
                [job] = runner.store.load()
                assert job.name == "call anna" and job.deliver == f"telegram:{OWNER}"
                assert job.delete_after_run and job.created_by == "agent"
                assert api.sent_texts(OWNER) == []  # turns answer the caller; nothing sent yet

                clock.set(time.time())
                scheduler = Scheduler(runner.store, runner, clock)
                fired_at = None
                while fired_at is None and clock.now() < time.time() + 25 * 60:
                    clock.advance(60.0)
                    async with anyio.create_task_group() as group:
                        if scheduler.tick(group):
                            fired_at = clock.now()
                assert fired_at is not None and job.schedule.at is not None
                assert job.schedule.at <= fired_at < job.schedule.at + 61
                await poll(
                    lambda: api.sent_texts(OWNER) == ["Time to call Anna about the flat."],
                    what="the reminder in the chat",
                )
                await poll(lambda: runner.store.load() == [], what="the one-shot to go")
