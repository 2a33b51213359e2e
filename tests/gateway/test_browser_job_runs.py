"""Isolated cron-job runs are grouped under their job in the web page's session list, in real
headless Chromium (see `browser/job_runs.spec.mjs`): the runs are made with `nodmix cron run`
against the scripted model, then a real gateway serves the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import run_nodmix, socket_gateway, write_config

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def _ok(state: Path, *args: str) -> str:
    done = run_nodmix(state, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_isolated_job_runs_are_grouped_under_their_job(isolated_state: Path) -> None:
    with ScriptedModelServer(echo) as model:
        write_config(isolated_state, model.base_url)
        job = json.loads(
            _ok(
                isolated_state,
                *("cron", "add", "--name", "digest", "--every", "1d"),
                *("--message", "summarise the day", "--session", "isolated", "--json"),
            )
        )
        for _ in range(3):
            _ok(isolated_state, "cron", "run", job["id"])
        _ok(isolated_state, "agent", "--local", "--session-key", "work", "-m", "hello")
        with socket_gateway() as gateway:
            done = run_spec("job_runs", gateway.url, JOB_ID=job["id"])
    assert_steps_passed(done, 3)
