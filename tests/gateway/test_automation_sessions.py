"""Sessions of isolated cron runs stay bounded: each job keeps its newest `runsKept` listed
and older ones are archived (their transcripts moved to `sessions/archive/`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.automation.history import RunHistory
from nodmix.automation.jobs import new_job
from nodmix.automation.schedule import every_schedule
from nodmix.automation.store import JobStore
from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.automation.support import write_config
from tests.gateway.support import NO_RETRY, run_nodmix, wait_until

pytestmark = pytest.mark.integration


def test_an_every_second_job_keeps_only_its_newest_sessions_listed(isolated_state: Path) -> None:
    with ScriptedModelServer(echo) as model:
        write_config(isolated_state, model.base_url, automation={"runsKept": 2})
        store = JobStore(isolated_state)
        with BackgroundGateway(GatewaySettings(port=0, token=None), retry=NO_RETRY):
            job = store.add(
                new_job(name="s", message="tick", schedule=every_schedule("1s"), now=0.0)
            )
            wait_until(lambda: len(model.requests) >= 6, what="six runs")
            store.remove(job.id)
        listed = run_nodmix(isolated_state, "sessions", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        keys = [s["key"] for s in json.loads(listed.stdout)]
        cron_keys = [k for k in keys if k.startswith(f"agent:main:cron:{job.id}:")]
        assert 1 <= len(cron_keys) <= 3  # runsKept plus one batch
        archive = isolated_state / "agents" / "main" / "sessions" / "archive"
        assert archive.is_dir() and any(archive.iterdir())
        assert len(RunHistory(isolated_state, kept=100).runs(job.id)) <= 2 * 2
