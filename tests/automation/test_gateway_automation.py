"""Automation in a running gateway, as a user meets it: `nodmix cron add` while the gateway
runs makes the model receive the message and `nodmix cron runs` show the run; the model's
`cron` tool schedules a reminder from a Telegram chat that is delivered there and then
removed. Real gateway, real scripted model and Bot API servers, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.automation.store import JobStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import last_user_text
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.telegram_server import ScriptedBotAPI
from tests.automation.support import telegram_section, user_texts, write_config
from tests.gateway.support import run_nodmix, wait_until

pytestmark = pytest.mark.integration
OWNER = 4242


def _gateway() -> BackgroundGateway:
    return BackgroundGateway(GatewaySettings(port=0, token=None), retry=RetryPolicy(attempts=1))


def test_a_job_added_from_the_cli_fires_in_the_running_gateway_and_shows_in_its_runs(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(echo) as model:
        write_config(isolated_state, model.base_url)
        with _gateway():
            added = run_nodmix(
                isolated_state,
                *("cron", "add", "--name", "ping", "--every", "2s"),
                *("--message", "ping", "--session", "isolated", "--json"),
            )
            assert added.returncode == 0, added.stderr
            job_id = json.loads(added.stdout)["id"]
            wait_until(lambda: "ping" in user_texts(model), what="the model to receive ping")

            def runs() -> list[dict[str, object]]:
                shown = run_nodmix(isolated_state, "cron", "runs", job_id, "--json")
                assert shown.returncode == 0, shown.stderr
                return list(json.loads(shown.stdout)["runs"])

            wait_until(lambda: any(r["status"] == "ok" for r in runs()), what="a finished run")
            run = next(r for r in runs() if r["status"] == "ok")
            assert run["reply"] == "ping" and run["trigger"] == "schedule"
            assert str(run["sessionKey"]).startswith(f"cron:{job_id}:")
            table = run_nodmix(isolated_state, "cron", "runs", job_id)
            assert " ok " in table.stdout and "ping" in table.stdout

            disabled = run_nodmix(isolated_state, "cron", "disable", job_id)
            assert disabled.returncode == 0, disabled.stderr
            listed = run_nodmix(isolated_state, "cron", "list")
            assert "disabled" in listed.stdout


def reminder(request: ModelRequest) -> ModelReply:
    """Schedules a reminder when asked; echoes anything else."""
    if isinstance(request.messages[-1], ToolResultMessage):
        return ModelReply.text("I will remind you.")
    text = last_user_text(request) or ""
    if text.startswith("remind me"):
        return ModelReply.tool_call(
            "cron",
            {"action": "add", "in": "1s", "name": "anna", "message": "Reminder: call Anna"},
        )
    return ModelReply.text(text)


def test_the_cron_tool_schedules_a_reminder_that_reaches_the_chat_and_then_removes_itself(
    isolated_state: Path, api: ScriptedBotAPI
) -> None:
    with ScriptedModelServer(reminder) as model:
        channels = telegram_section(api, dmPolicy="allowlist", allowFrom=[OWNER])
        write_config(isolated_state, model.base_url, channels=channels)
        store = JobStore(isolated_state)
        with _gateway():
            api.inject_text(
                chat_id=OWNER, sender_id=OWNER, text="remind me in 20 minutes to call Anna"
            )
            wait_until(lambda: "I will remind you." in api.sent_texts(OWNER), what="the answer")
            [job] = store.load()
            assert job.deliver == f"telegram:{OWNER}" and job.created_by == "agent"
            wait_until(lambda: "Reminder: call Anna" in api.sent_texts(OWNER), what="the reminder")
            wait_until(lambda: store.load() == [], what="the one-shot job to remove itself")
            assert user_texts(model)[-1] == "Reminder: call Anna"


def test_a_gateway_heartbeat_that_answers_ok_delivers_nothing_and_news_reach_the_chat(
    isolated_state: Path, api: ScriptedBotAPI, tmp_path: Path
) -> None:
    def checker(request: ModelRequest) -> ModelReply:
        text = last_user_text(request) or ""
        return ModelReply.text("The plants need water." if "URGENT" in text else "HEARTBEAT_OK")

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    checklist = workspace / "HEARTBEAT.md"
    checklist.write_text("- anything new?\n", encoding="utf-8")
    with ScriptedModelServer(checker) as model:
        path = write_config(
            isolated_state, model.base_url, channels=telegram_section(api, allowFrom=[OWNER])
        )
        config = json.loads(path.read_text())
        config["agents"]["defaults"].update(
            workspace=str(workspace), heartbeat={"every": "1s", "deliver": f"telegram:{OWNER}"}
        )
        path.write_text(json.dumps(config))
        with _gateway():
            wait_until(lambda: len(model.requests) >= 2, what="two beats")
            assert api.sent_texts(OWNER) == []
            assert "- anything new?" in user_texts(model)[0]
            checklist.write_text("- URGENT: water the plants\n", encoding="utf-8")
            wait_until(lambda: "The plants need water." in api.sent_texts(OWNER), what="the news")
