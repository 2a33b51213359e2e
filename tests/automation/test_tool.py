"""The agent's `cron` tool in real turns: the same validation as the CLI, delivery only to
chats the agent may message, list and remove."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodmix.automation.clock import SystemClock
from nodmix.automation.jobs import build_schedule, new_job
from nodmix.automation.tool import MAX_JOBS_PER_SESSION
from nodmix.messages import ToolResultMessage
from nodmix.origin import TurnOrigin
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import open_runner, telegram_section, write_config

pytestmark = pytest.mark.anyio


class CallsCron:
    """Calls `cron` with each argument set in turn, then answers with the last result."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls = calls
        self.results: list[tuple[bool, str]] = []

    def __call__(self, request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            self.results.append((last.is_error, last.text))
            if len(self.results) == len(self.calls):
                return ModelReply.text("done")
        return ModelReply.tool_call("cron", self.calls[len(self.results)])


async def test_the_cron_tool_validates_like_the_cli_and_lists_and_removes(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    script = CallsCron(
        [
            {"action": "add", "every": "soon", "message": "x"},
            {"action": "add", "cron": "0 7 * * *", "tz": "Mars/Base", "message": "x"},
            {"action": "add", "in": "1h", "message": "x", "deliver": "telegram:999"},
            {"action": "add", "in": "1h", "message": "x", "deliver": "sms:1"},
            {"action": "add", "every": "1d", "name": "daily", "message": "Plan the day"},
            {"action": "add", "in": "1h", "message": "tea", "deliver": "telegram:4242"},
            {"action": "list"},
            {"action": "remove", "id": "daily"},
            {"action": "remove", "id": "daily"},
        ]
    )
    async with ScriptedModelServer(script) as model:
        channels = telegram_section(api, dmPolicy="allowlist", allowFrom=[4242])
        config = write_config(isolated_state, model.base_url, channels=channels)
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            outcome = await runtime.run_turn("schedule things")
            assert outcome.result.reply == "done"
    # (The OpenAI wire format carries no error flag: the texts tell the outcomes apart.)
    texts = [text for _, text in script.results]
    assert texts[0].startswith("invalid duration 'soon'")
    assert texts[1].startswith("unknown time zone 'Mars/Base'")
    assert texts[2].startswith("telegram chat 999 is not allowed")
    assert texts[3].startswith("channel 'sms' is not configured")
    assert texts[4].startswith("scheduled job")
    assert "(daily): every 1d, result posted into session agent:main:main" in texts[4]
    assert texts[5].endswith("result to telegram:4242")
    assert "daily" in texts[6] and "tea" in texts[6]
    assert texts[7].startswith("removed job")
    assert texts[8].startswith("no cron job 'daily'")
    [left] = runner.store.load()
    assert left.message == "tea" and left.created_by == "agent" and left.delete_after_run
    assert api.sent_texts() == []


async def test_a_reminder_added_outside_any_chat_is_posted_into_the_turns_session(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    # From the CLI, the web page or the API there is no chat to answer in: the reply goes into
    # the conversation the reminder was asked in, and the model is told so.
    script = CallsCron(
        [
            {"action": "add", "in": "1h", "name": "stretch", "message": "Remind me to stretch"},
            {"action": "add", "in": "1h", "name": "tea", "message": "x", "session": "main"},
            {
                "action": "add",
                "in": "1h",
                "name": "work",
                "message": "x",
                "deliver": "session:work",
            },
            {"action": "add", "in": "1h", "message": "x", "deliver": "session:agent:ops:main"},
            {"action": "add", "in": "1h", "message": "x", "deliver": "session:agent:"},
        ]
    )
    async with ScriptedModelServer(script) as model:
        config = write_config(isolated_state, model.base_url, channels=telegram_section(api))
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            await runtime.run_turn("remind me in an hour to stretch")
            jobs = {job.name: job for job in runner.store.load()}
    stretch, tea, work, other_agent, malformed = (text for _, text in script.results)
    assert jobs["stretch"].deliver == "session:agent:main:main"
    assert "result posted into session agent:main:main" in stretch
    assert tea.endswith(", result in the main session") and jobs["tea"].deliver is None
    assert jobs["work"].deliver == "session:work" and "posted into session work" in work
    assert other_agent.startswith("invalid delivery target 'session:agent:ops:main'")
    assert "belongs to agent 'ops', not 'main'" in other_agent
    assert malformed.startswith("invalid delivery target 'session:agent:'")
    assert set(jobs) == {"stretch", "tea", "work"}


async def test_a_reminder_added_by_an_automation_turn_says_its_result_stays_in_the_run_history(
    isolated_state: Path,
) -> None:
    script = CallsCron(
        [
            {"action": "add", "in": "1h", "message": "Remind me to stretch"},
            {"action": "add", "in": "1h", "message": "x", "deliver": "session:main"},
        ]
    )
    async with ScriptedModelServer(script) as model:
        config = write_config(isolated_state, model.base_url)
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            await runtime.run_turn(
                "a job's message",
                session_key="cron:abc:run_1",
                origin=TurnOrigin(channel="cron", chat_id="abc"),
            )
            [job] = runner.store.load()
    kept, elsewhere = (text for _, text in script.results)
    assert job.deliver is None
    assert "result is sent nowhere" in kept and f"nodmix cron runs {job.id}" in kept
    assert kept.endswith("(`nodmix cron runs " + job.id + "`).")
    assert elsewhere == "a job from this chat can only post into this session"


async def test_a_group_chat_cannot_reach_the_main_session_or_the_owners_jobs_through_cron(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    script = CallsCron(
        [
            {"action": "add", "every": "1h", "session": "main", "message": "Quote the chat"},
            {"action": "add", "every": "1s", "message": "storm"},
            {"action": "list"},
            {"action": "remove", "id": "owner-daily"},
            {"action": "add", "every": "1h", "name": "ours", "message": "Ping the group"},
            {"action": "list"},
        ]
    )
    group = TurnOrigin(channel="telegram", chat_id="-100", chat_type="group", sender_id="7")
    async with ScriptedModelServer(script) as model:
        channels = telegram_section(api, groupPolicy="allowlist", groups=["-100"])
        config = write_config(isolated_state, model.base_url, channels=channels)
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            owner_job = new_job(
                name="owner-daily",
                message="Read my inbox",
                schedule=build_schedule(cron=None, every="1d", at=None, tz=None, now=0),
                now=0,
            )
            runner.store.add(owner_job)
            outcome = await runtime.run_turn(
                "schedule things", session_key="telegram:group:-100", origin=group
            )
            assert outcome.result.reply == "done"
    texts = [text for _, text in script.results]
    assert texts[0].startswith("only the owner's main session")
    assert texts[1].startswith("a repeating job from this chat runs at most every 60s")
    assert texts[2] == "no scheduled jobs"
    assert texts[3].startswith("no cron job 'owner-daily' added from this chat")
    assert texts[4].startswith("scheduled job") and "result to telegram:-100" in texts[4]
    assert "ours" in texts[5] and "owner-daily" not in texts[5]
    jobs = {job.name: job for job in runner.store.load()}
    assert set(jobs) == {"owner-daily", "ours"}
    assert jobs["ours"].session == "isolated"
    assert jobs["ours"].created_in == "agent:main:telegram:group:-100"


async def test_a_chat_can_keep_only_a_bounded_number_of_jobs(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    calls = [{"action": "add", "in": f"{i + 1}h", "message": f"m{i}"} for i in range(21)]
    script = CallsCron(calls)
    group = TurnOrigin(channel="telegram", chat_id="-100", chat_type="group", sender_id="7")
    async with ScriptedModelServer(script) as model:
        channels = telegram_section(api, groupPolicy="allowlist", groups=["-100"])
        config = write_config(isolated_state, model.base_url, channels=channels)
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            await runtime.run_turn("flood", session_key="telegram:group:-100", origin=group)
            assert len(runner.store.load()) == MAX_JOBS_PER_SESSION
    assert script.results[-1][1].startswith(f"this chat already has {MAX_JOBS_PER_SESSION}")
