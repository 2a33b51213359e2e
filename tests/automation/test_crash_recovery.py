"""Cron runs cut short by `kill -9` of the gateway: never left `running`, retried once, and no
slot started twice by the catch-up after the restart. Real gateway processes, the real CLI and
a scripted model server that holds the first turn open until the gateway is killed."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply, ModelStall
from nodmix.testing.model_server import ScriptedModelServer
from tests.automation.support import write_config
from tests.gateway.support import GatewayProcess, run_nodmix, wait_until

pytestmark = pytest.mark.integration


class HoldFirst:
    """Holds every turn open (the stream starts, nothing follows) until `hold` is cleared."""

    def __init__(self) -> None:
        self.hold = True
        self.seen: list[str] = []

    def __call__(self, request: ModelRequest) -> ModelReply | ModelStall:
        self.seen.append(request.messages[-1].text)
        if self.hold:
            return ModelStall(mode="hang")
        return ModelReply.text("summary sent")


def _cli(state: Path, *args: str) -> Any:
    done = run_nodmix(state, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if "--json" in args else done.stdout


def _runs(state: Path, job_id: str) -> list[dict[str, Any]]:
    return list(_cli(state, "cron", "runs", job_id, "--json")["runs"])


def _add_job(state: Path, *extra: str) -> str:
    job = _cli(
        state,
        *("cron", "add", "--name", "nightly", "--at", "+1s", "--message", "summarise"),
        *extra,
        "--json",
    )
    return str(job["id"])


def test_a_run_killed_mid_turn_is_marked_interrupted_and_retried_once(
    isolated_state: Path,
) -> None:
    state = isolated_state
    model = HoldFirst()
    with ScriptedModelServer(model) as server:
        write_config(state, server.base_url)
        job_id = _add_job(state)
        with GatewayProcess(state) as gateway:
            wait_until(lambda: "summarise" in model.seen, what="the run's turn to start")
            code, _ = gateway.stop(signal.SIGKILL)
        assert code == -signal.SIGKILL

        # With no gateway running, the run already reads as what it is.
        (run,) = _runs(state, job_id)
        assert run["status"] == "interrupted" and run["trigger"] == "schedule"
        assert "process running it stopped" in run["error"]
        (row,) = _cli(state, "cron", "list", "--json")["jobs"]
        assert row["lastStatus"] == "interrupted"

        model.hold = False
        with GatewayProcess(state) as gateway:
            wait_until(
                lambda: any(r["status"] == "ok" for r in _runs(state, job_id)),
                what="the retry to finish",
            )
            gateway.stop()
        with GatewayProcess(state) as gateway:  # a further restart retries nothing more
            gateway.stop()
    first, retry = _runs(state, job_id)
    assert first["status"] == "interrupted" and first["finishedAt"] is not None
    assert retry["status"] == "ok" and retry["trigger"] == "retry"
    assert retry["slot"] == first["slot"]
    assert model.seen == ["summarise", "summarise"]
    assert _cli(state, "cron", "list", "--json")["jobs"] == []  # the one-shot job is done


def test_a_job_that_must_not_be_retried_is_only_marked_interrupted(isolated_state: Path) -> None:
    state = isolated_state
    model = HoldFirst()
    with ScriptedModelServer(model) as server:
        write_config(state, server.base_url)
        job_id = _add_job(state, "--no-retry-interrupted")
        with GatewayProcess(state) as gateway:
            wait_until(lambda: "summarise" in model.seen, what="the run's turn to start")
            gateway.stop(signal.SIGKILL)
        model.hold = False
        with GatewayProcess(state) as gateway:
            wait_until(
                lambda: (
                    _cli(state, "cron", "list", "--json")["jobs"][0]["lastStatus"] == "interrupted"
                ),
                what="the run to be closed",
            )
            gateway.stop()
    (run,) = _runs(state, job_id)
    assert run["status"] == "interrupted" and run["finishedAt"] is not None
    assert model.seen == ["summarise"]
    assert "last interrupted" in _cli(state, "cron", "list")


def test_the_catch_up_after_a_restart_never_starts_a_slot_twice(isolated_state: Path) -> None:
    """Killed after the run is on record but before the scheduler's state file says so: the
    restarted scheduler sees the slot as missed, finds it in the history and does not fire it
    again; the interrupted run is retried once instead."""
    state = isolated_state
    model = HoldFirst()
    model.hold = False
    with ScriptedModelServer(model) as server:
        write_config(state, server.base_url)
        job_id = _add_job(state)
        crash = {"NODMIX_CRASH_AT": "automation.fired-recorded"}
        killed = run_nodmix(state, "gateway", "--port", "0", env=crash)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        saved = state / "automation" / "state.json"
        if saved.exists():  # it may not have been written at all yet
            assert json.loads(saved.read_text())["jobs"][job_id]["nextRunAt"] is not None
        with GatewayProcess(state) as gateway:
            wait_until(
                lambda: any(r["status"] == "ok" for r in _runs(state, job_id)),
                what="the retry to finish",
            )
            gateway.stop()
    triggers = [(r["trigger"], r["status"]) for r in _runs(state, job_id)]
    assert triggers == [("schedule", "interrupted"), ("retry", "ok")]
    assert 1 <= len(model.seen) <= 2  # the retry's turn (and the first one's, if it got there)
