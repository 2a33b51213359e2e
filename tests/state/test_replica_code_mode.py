"""A code-mode run parked by one gateway replica is continued by a `wait` on another: the
snapshot is in PostgreSQL. The tool call still running on the first replica reaches the
program as interrupted, as after a restart, and is never run twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import wait_until
from tests.gateway.test_code_mode_restart import HOLD_PLUGIN, CodeModeModel
from tests.state.replicas import chat, replica_state, replicas

pytestmark = pytest.mark.integration


def _replica(root: Path, name: str, model_url: str, db_url: str) -> Path:
    plugin = root / "holder.py"
    plugin.write_text(HOLD_PLUGIN, encoding="utf-8")
    state = replica_state(
        root,
        name,
        model_url,
        db_url,
        tools={"codeMode": {"enabled": True, "timeoutMs": 1000}},
        plugins={"load": {"paths": [str(plugin)]}},
    )
    (state / "workspace").mkdir(exist_ok=True)
    (state / "workspace" / "notes.txt").write_text("Ferry at 9:40.\n", encoding="utf-8")
    return state


def test_a_run_parked_on_one_replica_continues_with_wait_on_another(
    tmp_path: Path, postgres_url: str
) -> None:
    model = CodeModeModel()
    with ScriptedModelServer(model) as server:
        states = [_replica(tmp_path, n, server.base_url, postgres_url) for n in ("a", "b")]
        with replicas(states) as (a, b):
            chat(a, "start", "trip")
            (parked,) = model.results
            assert parked["status"] == "waiting", parked
            assert (states[0] / "workspace" / "hold-started").exists()
            chat(b, f"resume {parked['runId']}", "trip")
            wait_until(lambda: len(model.results) == 2, what="the wait's result")
            done = model.results[1]
            assert done["status"] == "completed", done
            assert done["value"]["note"] == "Ferry at 9:40."
            assert "interrupted" in done["value"]["caught"]
            assert not (states[1] / "workspace" / "hold-started").exists()  # never run twice
            # The first replica's copy is not continued a second time.
            chat(a, f"resume {parked['runId']}", "trip")
            again = model.results[2]
            assert again["status"] != "completed", again
    assert json.dumps(again)  # reported, not crashed
