"""Durable subagents: `nodmix gateway` is killed (SIGKILL) while a subagent nobody waits for
works; the next start continues the run in its session and announces its result, and a
subagent whose requester waited is reported failed. Real gateway subprocesses, the real CLI,
the scripted model behind a real socket."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nodmix.messages import UserMessage
from nodmix.sessions.replay import messages_for_model
from nodmix.sessions.transcript import Transcript
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import GatewayProcess, run_nodmix, wait_until
from tests.subagents.support import HeldChildren, records, write_config

pytestmark = pytest.mark.integration

TOKEN = "subagent-restart-token"


def _ask(state: Path, gateway: GatewayProcess, text: str, *extra: str) -> str:
    done = run_nodmix(state, "agent", "-m", text, "--url", gateway.url, "--token", TOKEN, *extra)
    assert done.returncode == 0, done.stderr + gateway.stderr_so_far()
    return done.stdout


def test_an_accepted_run_survives_a_kill_and_a_waited_for_one_is_reported_failed(
    isolated_state: Path,
) -> None:
    state = isolated_state
    model = HeldChildren()
    with ScriptedModelServer(model) as server:
        write_config(state, server.base_url)
        with GatewayProcess(state, "--token", TOKEN) as gateway:
            accepted = _ask(state, gateway, "spawn: held slow survey")
            assert "accepted as sub_" in accepted
            waiter = subprocess.Popen(
                [sys.executable, "-m", "nodmix", "agent", "-m", "spawn wait: held waited job"]
                + ["--session-key", "other", "--url", gateway.url, "--token", TOKEN],
                env=gateway.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            wait_until(lambda: model.in_flight == 2, what="both subagents working")
            wait_until(
                lambda: (
                    {r.status for r in records(state)} == {"running"} and len(records(state)) == 2
                ),
                what="both runs recorded as running",
            )
            code, _ = gateway.stop(signal.SIGKILL)
            waiter.communicate(timeout=30)
        assert code == -signal.SIGKILL
        model.release()  # the continued run answers at once

        with GatewayProcess(state, "--token", TOKEN) as gateway:
            wait_until(
                lambda: (
                    all(not r.is_open for r in records(state))
                    and any(r.announced for r in records(state))
                ),
                what="the runs to be continued and reported",
                timeout=30,
            )
            history = _ask(state, gateway, "what came back?")
            code, stderr = gateway.stop()
    survey = next(r for r in records(state) if r.task == "held slow survey")
    waited = next(r for r in records(state) if r.task == "held waited job")
    assert survey.status == "completed" and survey.restarts == 1 and survey.announced
    assert survey.reply == "done: held slow survey"
    assert waited.status == "failed"
    assert waited.error == "interrupted: Nodmix stopped while its requester waited"
    child = Transcript.load(
        state / "agents" / "main" / "sessions" / _file_of(state, survey.child_key),
        read_only=True,
    )
    users = [m.text for m in messages_for_model(child.entries) if isinstance(m, UserMessage)]
    assert users[0] == "held slow survey" and users[-1].startswith("[Nodmix restarted")
    assert "done: what came back?" in history
    assert code == 0 and "Traceback" not in stderr


def _file_of(state: Path, key: str) -> str:
    from nodmix.sessions.store import SessionStore

    entry = SessionStore.for_agent(state, "main").get(key)
    assert entry is not None
    return entry.session_file


def test_a_gateway_killed_in_the_middle_of_a_fan_out_reports_every_child_failed(
    isolated_state: Path,
) -> None:
    state = isolated_state
    model = HeldChildren()
    with ScriptedModelServer(model) as server:
        write_config(state, server.base_url, tools={"codeMode": {"enabled": True}})
        with GatewayProcess(state, "--token", TOKEN) as gateway:
            asker = subprocess.Popen(
                [sys.executable, "-m", "nodmix", "agent", "-m", "fanout 20 held"]
                + ["--url", gateway.url, "--token", TOKEN],
                env=gateway.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            wait_until(lambda: model.in_flight == 8, what="eight children working")
            wait_until(
                lambda: sum(r.status == "running" for r in records(state)) == 8,
                what="their records",
            )
            gateway.stop(signal.SIGKILL)
            asker.communicate(timeout=30)
        model.release()
        started = len(records(state))
        with GatewayProcess(state, "--token", TOKEN) as gateway:
            wait_until(
                lambda: all(not r.is_open for r in records(state)),
                what="every child reported",
                timeout=30,
            )
            code, stderr = gateway.stop()
    runs = records(state)
    assert len(runs) == started and 8 <= started <= 16
    assert {r.status for r in runs} == {"failed"}
    assert {r.error for r in runs} == {"interrupted: Nodmix stopped while its requester waited"}
    assert code == 0 and "Traceback" not in stderr
