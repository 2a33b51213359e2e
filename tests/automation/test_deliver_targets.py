"""Delivery targets are checked the same way everywhere: `nodmix cron add --deliver`, webhook
mappings through the real gateway, the runner before it sends, and `nodmix message send`. A
chat the channel's rules do not allow, or a channel that is not configured, is refused with
one line naming the rule; `--force` is the owner shell's way past the rules, and it is
logged."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from nodmix.automation.clock import SystemClock
from nodmix.automation.jobs import new_job
from nodmix.automation.schedule import every_schedule
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import open_runner, telegram_section, write_config
from tests.gateway.support import NO_RETRY, run_nodmix

pytestmark = pytest.mark.integration

OWNER = 42
STRANGER = 99999


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    with ScriptedBotAPI() as server:
        yield server


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(echo) as server:
        yield server


def _add(state: Path, target: str, *more: str) -> tuple[int, str, str]:
    done = run_nodmix(
        state,
        *("cron", "add", "--name", "digest", "--every", "1h", "--message", "news"),
        *("--deliver", target, *more),
    )
    return done.returncode, done.stdout, done.stderr


def test_cron_add_refuses_a_chat_or_a_channel_the_rules_do_not_allow(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, channels=telegram_section(api, allowFrom=[OWNER]))
    code, _, stranger = _add(isolated_state, f"telegram:{STRANGER}")
    assert code == 1 and len(stranger.strip().splitlines()) == 1
    assert f"telegram chat {STRANGER} is not allowed" in stranger
    assert "channels.telegram.allowFrom" in stranger and "--force" in stranger
    code, _, unconfigured = _add(isolated_state, "slack:C123", "--force")
    assert code == 1 and "channel 'slack' is not configured" in unconfigured
    assert "channels.slack" in unconfigured
    assert _add(isolated_state, f"telegram:{OWNER}")[0] == 0
    code, _, forced = _add(isolated_state, f"telegram:{STRANGER}", "--force")
    assert code == 0 and f"--deliver telegram:{STRANGER} forced" in forced
    jobs = json.loads(run_nodmix(isolated_state, "cron", "list", "--json").stdout)["jobs"]
    assert sorted((j["deliver"], j.get("forced", False)) for j in jobs) == [
        (f"telegram:{OWNER}", False),
        (f"telegram:{STRANGER}", True),
    ]
    logged = run_nodmix(isolated_state, "logs", "--json")
    assert f"cron --deliver telegram:{STRANGER} forced past the channel's rules" in logged.stdout


def test_a_webhook_mapping_to_a_channel_not_configured_is_refused_at_load(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    hooks = {"mappings": {"nowhere": {"message": "alert", "deliver": "slack:C123"}}}
    channels = telegram_section(api, allowFrom=[OWNER])
    write_config(isolated_state, model.base_url, channels=channels, hooks=hooks)
    started = run_nodmix(isolated_state, "gateway", "--port", "0")
    assert started.returncode == 1 and started.stdout == ""
    assert started.stderr.strip() == (
        f"nodmix: error: {isolated_state / 'nodmix.json'}: hooks.mappings.nowhere.deliver: "
        "'slack:C123': channel 'slack' is not configured (no channels.slack section, or it is "
        "disabled)"
    )


def test_a_webhook_mapping_that_delivers_outside_the_rules_is_refused_per_call(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    hooks = {
        "mappings": {
            "alert": {"message": "alert {{body.x}}", "deliver": f"telegram:{STRANGER}"},
            "fine": {"message": "alert {{body.x}}", "deliver": f"telegram:{OWNER}"},
        }
    }
    channels = telegram_section(api, allowFrom=[OWNER])
    write_config(isolated_state, model.base_url, channels=channels, hooks=hooks)
    with BackgroundGateway(GatewaySettings(port=0), retry=NO_RETRY) as gateway:
        auth = {"authorization": f"Bearer {gateway.settings.token}"}

        def post(name: str) -> httpx2.Response:
            return httpx2.post(f"{gateway.url}/hooks/{name}", json={"x": 1}, headers=auth)

        stranger, fine = post("alert"), post("fine")
        api.wait_for(lambda: api.sent_texts(OWNER), timeout=30)
    assert stranger.status_code == 409
    message = stranger.json()["error"]["message"]
    assert message.startswith("hooks.mappings.alert.deliver: telegram chat 99999 is not allowed")
    assert fine.status_code == 202
    assert api.sent_texts(OWNER) == ["alert 1"] and api.sent_texts(STRANGER) == []
    assert len(model.requests) == 1  # the refused calls never reached the model


@pytest.mark.anyio
async def test_the_runner_checks_again_before_it_sends(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    # A job written before the rules changed (or into jobs.json by hand) is not delivered.
    config = write_config(isolated_state, model.base_url, channels=telegram_section(api))
    async with open_runner(isolated_state, config, SystemClock()) as (_, runner):
        job = runner.store.add(
            new_job(
                name="digest",
                message="news",
                schedule=every_schedule("1h"),
                now=time.time(),
                deliver=f"telegram:{STRANGER}",
            )
        )
        record = await runner.run_job(job, "manual")
        assert record is not None and record.status == "ok" and not record.delivered
    assert api.sent_texts(STRANGER) == []


def test_message_send_names_the_rule(
    isolated_state: Path, api: ScriptedBotAPI, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, channels=telegram_section(api, allowFrom=[OWNER]))
    done = run_nodmix(
        isolated_state, "message", "send", "--channel", "telegram", "--to", str(STRANGER), "hi"
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"nodmix: error: telegram chat {STRANGER} is not allowed: it is not in "
        "channels.telegram.allowFrom, .groups or .ownerIds, and no sender with that id has "
        "paired"
    )
    other = run_nodmix(isolated_state, "message", "send", "--channel", "slack", "--to", "C1", "hi")
    assert other.returncode == 1 and "channel 'slack' is not configured" in other.stderr
