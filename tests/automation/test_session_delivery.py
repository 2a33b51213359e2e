"""A reminder asked for outside a chat reaches the user: the `cron` tool called from a web
(WebSocket) session, the OpenAI-compatible API or the CLI delivers the job's reply into that
session's transcript (the main session for the API and the CLI) and to connected WebSocket
clients. Real gateway, real scripted model, the real CLI; the scheduler runs on a
`ManualClock` the test moves."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from nodmix.automation.clock import ManualClock, SystemClock
from nodmix.automation.jobs import build_schedule, new_job
from nodmix.automation.store import JobStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.gateway.client import GatewayClient
from nodmix.messages import AssistantMessage, TextBlock, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.providers.retry import RetryPolicy
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import last_user_text
from tests.automation.support import open_runner, poll, user_texts, write_config
from tests.gateway.support import poll_until, run_nodmix

pytestmark = [pytest.mark.integration, pytest.mark.anyio]
HOUR = 3600.0


def reminder(request: ModelRequest) -> ModelReply:
    """Schedules a reminder in 20 minutes when asked; echoes anything else."""
    if isinstance(request.messages[-1], ToolResultMessage):
        return ModelReply.text("I will remind you.")
    text = last_user_text(request) or ""
    if text.startswith("remind me"):
        return ModelReply.tool_call(
            "cron",
            {"action": "add", "in": "20m", "name": "anna", "message": "Reminder: call Anna"},
        )
    return ModelReply.text(text)


def _gateway(clock: ManualClock) -> BackgroundGateway:
    settings = GatewaySettings(port=0, token=None, automation_clock=clock)
    return BackgroundGateway(settings, retry=RetryPolicy(attempts=1))


def _posted(entries: list[dict[str, Any]]) -> list[str]:
    """Texts of the assistant messages jobs posted into a transcript."""
    return [
        "".join(b.get("text", "") for b in e["message"]["content"])
        for e in entries
        if e.get("type") == "message"
        and e["message"].get("role") == "assistant"
        and e["message"].get("api") == "cron"
    ]


async def _history(client: GatewayClient, key: str) -> list[dict[str, Any]]:
    answer = await client.request("sessions.history", {"sessionKey": key})
    return list(answer["entries"])


async def test_a_reminder_from_a_web_session_is_posted_there_and_pushed_to_connected_clients(
    isolated_state: Path,
) -> None:
    clock = ManualClock(time.time())
    with ScriptedModelServer(reminder) as model:
        write_config(isolated_state, model.base_url)
        store = JobStore(isolated_state)
        with _gateway(clock) as gateway:
            events: list[dict[str, Any]] = []
            async with GatewayClient.connect(gateway.url, token=gateway.settings.token) as client:
                client.listen("session", events.append)
                answer = await client.request(
                    "agent", {"message": "remind me to call Anna", "sessionKey": "web"}
                )
                assert "I will remind you." in str(answer)
                [job] = store.load()
                assert job.deliver == "session:agent:main:web"
                listed = run_nodmix(isolated_state, "cron", "list")
                assert "session:agent:main:web" in listed.stdout, listed.stderr

                await anyio.to_thread.run_sync(gateway.call, clock.advance, HOUR)

                async def heard() -> bool:
                    return bool(events)

                await poll_until(heard, what="the session event")
                [event] = events
                assert event["sessionKey"] == "agent:main:web"
                assert event["source"] == {"kind": "cron", "jobId": job.id, "jobName": "anna"}
                assert _posted([event["entry"]]) == ["Reminder: call Anna"]
                entries = await _history(client, "web")
                assert _posted(entries) == ["Reminder: call Anna"]
                assert entries[-1]["id"] == event["entry"]["id"]
                # no model turn ran in the web session: the job ran in its own session
                assert user_texts(model).count("Reminder: call Anna") == 1

                await client.request("agent", {"message": "what now?", "sessionKey": "web"})
                seen = [str(m) for m in model.requests[-1].request.messages]
                assert any("Reminder: call Anna" in m for m in seen)


async def test_reminders_from_the_api_and_the_cli_are_posted_into_the_main_session(
    isolated_state: Path,
) -> None:
    clock = ManualClock(time.time())
    with ScriptedModelServer(reminder) as model:
        write_config(isolated_state, model.base_url)
        store = JobStore(isolated_state)
        with _gateway(clock) as gateway:
            auth = {"authorization": f"Bearer {gateway.settings.token}"}
            async with httpx2.AsyncClient(base_url=gateway.url, headers=auth, timeout=30) as http:
                response = await http.post(
                    "/v1/chat/completions",
                    json={
                        "model": "nodmix",
                        "messages": [{"role": "user", "content": "remind me from the API"}],
                    },
                )
                assert response.status_code == 200, response.text
            cli = await anyio.to_thread.run_sync(
                lambda: run_nodmix(
                    isolated_state, "agent", "-m", "remind me from the CLI", "--url", gateway.url
                )
            )
            assert cli.returncode == 0, cli.stderr
            jobs = store.load()
            assert [j.deliver for j in jobs] == ["session:agent:main:main"] * 2

            await anyio.to_thread.run_sync(gateway.call, clock.advance, HOUR)
            async with GatewayClient.connect(gateway.url, token=gateway.settings.token) as client:

                async def both_posted() -> bool:
                    return len(_posted(await _history(client, "main"))) == 2

                await poll_until(both_posted, what="both reminders in the main session")

            async def removed() -> bool:
                return store.load() == []

            await poll_until(removed, what="the one-shot jobs to go")


async def test_a_reminder_due_while_a_turn_runs_in_its_session_is_appended_after_that_turn(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(reminder) as model:
        config = write_config(isolated_state, model.base_url)
        async with open_runner(isolated_state, config, SystemClock()) as (runtime, runner):
            job = new_job(
                name="anna",
                message="Reminder: call Anna",
                schedule=build_schedule(cron=None, every=None, at="+1h", tz=None, now=time.time()),
                now=time.time(),
                deliver="session",
            )
            runner.store.add(job)
            key = "agent:main:main"
            records: list[Any] = []
            async with (
                anyio.create_task_group() as group,
                runtime.sessions.hold_turn(key, timeout=10),  # a turn is running there
            ):
                group.start_soon(lambda: _collect(runner.run_job(job, "manual"), records))
                lock = runtime.sessions.turn_lock(key)
                await poll(lambda: lock.statistics().tasks_waiting == 1, what="the post")
                session = runtime.open_session(runtime.agent(None), key)
                answer = AssistantMessage(content=(TextBlock(text="the running turn"),))
                session.append_message(answer)
            [record] = records
            assert record.status == "ok" and record.delivered
            texts = [
                getattr(e.message, "text", "") for e in session.entries if hasattr(e, "message")
            ]
            assert texts[-2:] == ["the running turn", "Reminder: call Anna"]


async def _collect(run: Any, into: list[Any]) -> None:
    into.append(await run)


class ChatProcess:
    """`nodmix agent --url URL` (the interactive chat) with piped stdin; stdout read by a
    thread so the test can wait for lines under a deadline."""

    def __init__(self, state: Path, url: str) -> None:
        env = {**os.environ, "NODMIX_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1"}
        env["NODMIX_CONFIG_PATH"] = str(state / "nodmix.json")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodmix", "agent", "--chat", "--url", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def say(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def wait_for(self, part: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.seen:
                if part in line:
                    return line
            left = deadline - time.monotonic()
            if left <= 0:
                ended = self.proc.poll()
                errors = self.proc.stderr.read() if ended is not None and self.proc.stderr else ""
                raise AssertionError(f"the chat never printed {part!r}: {self.seen} {errors}")
            try:
                self.seen.append(self.lines.get(timeout=left))
            except queue.Empty:
                continue

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self._reader.join(timeout=10)  # it ends at the end of the output
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code


def test_the_chat_prints_a_reminder_as_it_arrives_and_announces_it_when_reopened(
    isolated_state: Path,
) -> None:
    clock = ManualClock(time.time())
    with ScriptedModelServer(reminder) as model:
        write_config(isolated_state, model.base_url)
        store = JobStore(isolated_state)
        with _gateway(clock) as gateway:
            chat = ChatProcess(isolated_state, gateway.url)
            try:
                chat.say("remind me to call Anna")
                chat.wait_for("I will remind you.")
                [job] = store.load()
                assert job.deliver == "session:agent:main:main"
                gateway.call(clock.advance, HOUR)
                line = chat.wait_for("Reminder: call Anna")
                assert line.endswith(f"[from cron job 'anna' ({job.id})] Reminder: call Anna")
            finally:
                assert chat.close() == 0

            reopened = ChatProcess(isolated_state, gateway.url)
            try:
                head = reopened.wait_for("new message")
                assert head == f"1 new message from cron job {job.id}:"
                assert reopened.wait_for("Reminder: call Anna") == "  Reminder: call Anna"
            finally:
                assert reopened.close() == 0
