"""The heartbeat: the agent reads `HEARTBEAT.md` in its main session; an acknowledgement is
not delivered, anything else reaches the chat; no checklist or a quiet hour means no turn."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import anyio
import pytest

from nodmix.automation.clock import ManualClock, SystemClock
from nodmix.automation.heartbeat import Heartbeat, is_ack, within_active_hours
from nodmix.automation.history import RunRecord
from nodmix.config.automation_schema import ActiveHoursConfig, HeartbeatConfig
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import last_user_text
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import (
    open_runner,
    poll,
    telegram_section,
    user_texts,
    write_config,
)

pytestmark = pytest.mark.anyio
CHAT = 4242


def checker(request: ModelRequest) -> ModelReply:
    """Acknowledges unless the checklist mentions something urgent."""
    text = last_user_text(request) or ""
    return ModelReply.text(
        "Your passport expires in 5 days." if "URGENT" in text else "HEARTBEAT_OK"
    )


async def _beat(
    state: Path,
    api: ScriptedBotAPI,
    checklist: str | None,
    active_hours: ActiveHoursConfig | None = None,
) -> tuple[bool, list[str], list[RunRecord]]:
    async with ScriptedModelServer(checker) as model:
        path = write_config(state, model.base_url, channels=telegram_section(api, allowFrom=[CHAT]))
        async with open_runner(state, path, SystemClock()) as (runtime, runner):
            workspace = runtime.agent(None).workspace
            workspace.mkdir(parents=True, exist_ok=True)
            if checklist is not None:
                (workspace / "HEARTBEAT.md").write_text(checklist, encoding="utf-8")
            settings = HeartbeatConfig(
                every="30m", deliver=f"telegram:{CHAT}", active_hours=active_hours
            )
            beat = Heartbeat(
                runner, agent_id="main", workspace=lambda: workspace, config=lambda: settings
            )
            ran = await beat.beat()
            return ran, user_texts(model), runner.history.runs("heartbeat-main")


async def test_a_heartbeat_that_answers_ok_delivers_nothing(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    ran, texts, runs = await _beat(isolated_state, api, "- check the calendar\n")
    assert ran
    [text] = texts
    assert "- check the calendar" in text and "HEARTBEAT_OK" in text
    assert runs[0].status == "ok" and runs[0].reply == "HEARTBEAT_OK" and not runs[0].delivered
    assert api.sent_texts(CHAT) == []


async def test_a_heartbeat_with_something_to_say_delivers_it(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    ran, _, runs = await _beat(isolated_state, api, "- URGENT: passport renewal\n")
    assert ran and runs[0].delivered
    assert api.sent_texts(CHAT) == ["Your passport expires in 5 days."]


async def test_no_checklist_or_an_empty_one_means_no_turn(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    assert await _beat(isolated_state, api, None) == (False, [], [])
    assert await _beat(isolated_state, api, "  \n") == (False, [], [])


async def test_outside_active_hours_nothing_runs(isolated_state: Path, api: ScriptedBotAPI) -> None:
    now = datetime.fromtimestamp(time.time(), ZoneInfo("UTC"))
    closed = ActiveHoursConfig(
        start=f"{(now.hour + 2) % 24:02d}:00", end=f"{(now.hour + 3) % 24:02d}:00", timezone="UTC"
    )
    assert await _beat(isolated_state, api, "- x", active_hours=closed) == (False, [], [])


def test_active_hours_handle_windows_across_midnight() -> None:
    paris = ZoneInfo("Europe/Paris")
    night = HeartbeatConfig(
        every="1h",
        active_hours=ActiveHoursConfig(start="22:00", end="06:00", timezone="Europe/Paris"),
    )
    at = lambda h: datetime(2030, 1, 1, h, 30, tzinfo=paris).timestamp()  # noqa: E731
    assert within_active_hours(night, at(23)) and within_active_hours(night, at(3))
    assert not within_active_hours(night, at(12))


def test_acknowledgements_are_recognised_with_light_markup() -> None:
    assert is_ack("HEARTBEAT_OK") and is_ack(" **HEARTBEAT_OK** ") and is_ack("heartbeat_ok.")
    assert not is_ack("HEARTBEAT_OK, but your passport expires soon")


async def test_the_beat_loop_waits_for_the_interval_on_the_injected_clock(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    async with ScriptedModelServer(checker) as model:
        path = write_config(
            isolated_state, model.base_url, channels=telegram_section(api, allowFrom=[CHAT])
        )
        clock = ManualClock(1_900_000_000.0)
        async with open_runner(isolated_state, path, clock) as (runtime, runner):
            workspace = runtime.agent(None).workspace
            workspace.mkdir(parents=True, exist_ok=True)
            (workspace / "HEARTBEAT.md").write_text("- look around", encoding="utf-8")
            settings = HeartbeatConfig(every="30m")
            beat = Heartbeat(
                runner, agent_id="main", workspace=lambda: workspace, config=lambda: settings
            )
            async with anyio.create_task_group() as group:
                group.start_soon(beat.run)
                await anyio.wait_all_tasks_blocked()
                clock.advance(29 * 60)
                await anyio.wait_all_tasks_blocked()
                assert model.requests == []
                clock.advance(60)
                await poll(lambda: len(runner.history.runs("heartbeat-main")) == 1, what="a beat")
                group.cancel_scope.cancel()
