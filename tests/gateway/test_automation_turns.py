"""A job due while the gateway is shutting down is recorded as skipped, not as a failure
reported to the chat."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nodmix.automation.clock import SystemClock
from nodmix.automation.jobs import new_job
from nodmix.automation.schedule import every_schedule
from nodmix.gateway import GatewaySettings, create_app
from nodmix.gateway.app import gateway_of_app
from nodmix.gateway.automation import GatewayAutomationTurns
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import open_runner, telegram_section, write_config

pytestmark = pytest.mark.anyio


async def test_a_run_the_closing_gateway_cannot_start_is_skipped_quietly(
    isolated_state: Path,
) -> None:
    with ScriptedBotAPI() as api:
        async with ScriptedModelServer(echo) as model:
            channels = telegram_section(api)
            config = write_config(isolated_state, model.base_url, channels=channels)
            async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
                gateway = gateway_of_app(create_app(runtime, GatewaySettings(port=0)))
                # Not serving (its lifespan has ended): turns are refused with 503.
                runner.turns = GatewayAutomationTurns(gateway)
                job = runner.store.add(
                    new_job(
                        name="j",
                        message="m",
                        schedule=every_schedule("1h"),
                        now=time.time(),
                        deliver="telegram:4242",
                    )
                )
                record = await runner.run_job(job, "schedule")
        assert record is not None and record.status == "skipped"
        assert "shutting down" in (record.error or "")
        assert api.sent_texts() == [] and model.requests == []
