"""`agents.defaults.subagents` and per-agent keys (merged one by one, checked like every config
key), and what the CLI shows of subagents: `nodmix sessions list [--all]` with their kind and
parent, `sessions show` with their run, and a one-message `nodmix agent --local` that waits for
the subagents it started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodmix.config.loader import load_config
from nodmix.errors import ConfigError
from nodmix.subagents.settings import SubagentSettings, subagent_settings
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from nodmix.tools.policy import ToolPolicy
from tests.subagents.support import records, write_config
from tests.support.cli import run_nodmix


def test_defaults_and_an_agents_own_keys_merge_key_by_key(isolated_state: Path) -> None:
    path = write_config(
        isolated_state,
        "http://127.0.0.1:9/v1",
        {"maxConcurrent": 3, "tools": {"deny": ["exec"]}, "archiveAfterMinutes": 0},
        agents=[
            {"id": "main"},
            {
                "id": "deep",
                "subagents": {"maxDepth": 3, "tools": {"allow": ["read"], "deny": ["ls"]}},
            },
        ],
    )
    config = load_config(path).config
    assert subagent_settings(config, "main") == SubagentSettings(
        max_concurrent=3, policy=ToolPolicy(deny=("exec",)), archive_after_minutes=0
    )
    deep = subagent_settings(config, "deep")
    assert (deep.max_depth, deep.max_concurrent, deep.max_children_per_turn) == (3, 3, 32)
    assert deep.policy == ToolPolicy(allow=("read",), deny=("exec", "ls"))
    assert subagent_settings(
        load_config(write_config(isolated_state, "http://127.0.0.1:9/v1")).config, "main"
    ) == (SubagentSettings())


@pytest.mark.parametrize(
    ("section", "fragment"),
    [
        ({"maxDepht": 2}, "agents.defaults.subagents.maxDepht"),
        ({"maxConcurrent": 0}, "agents.defaults.subagents.maxConcurrent"),
        ({"tools": {"allow": "read"}}, "agents.defaults.subagents.tools.allow"),
    ],
)
def test_a_bad_subagents_key_is_one_error_naming_the_file_and_key(
    isolated_state: Path, section: dict[str, object], fragment: str
) -> None:
    path = write_config(isolated_state, "http://127.0.0.1:9/v1", section)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert fragment in str(caught.value) and "nodmix.json" in str(caught.value)


@pytest.mark.integration
def test_the_cli_lists_and_shows_subagents_and_a_local_run_waits_for_its_own(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        spawned = run_nodmix(isolated_state, "agent", "--local", "-m", "spawn: sleep 0.3 tidy up")
        assert spawned.returncode == 0, spawned.stderr
        waited = run_nodmix(isolated_state, "agent", "--local", "-m", "spawn wait: quick sum")
        assert waited.returncode == 0, waited.stderr
    assert "waiting for 1 subagent" in spawned.stdout
    assert 'Subagent "sleep 0.3 tidy up" finished:\n\ndone: tidy up' in spawned.stdout
    assert "quick sum: done: quick sum" in waited.stdout
    runs = {run.task: run for run in records(isolated_state)}
    tidy = runs["sleep 0.3 tidy up"]
    assert tidy.status == "completed" and tidy.announced

    listing = run_nodmix(isolated_state, "sessions", "list", "--all")
    assert listing.returncode == 0, listing.stderr
    header, *rows = listing.stdout.splitlines()
    assert header.split()[:6] == ["KEY", "SESSION", "ID", "STATUS", "KIND", "PARENT"]
    child = next(row for row in rows if row.startswith(tidy.child_key))
    assert "subagent (completed)" in child and "agent:main:main" in child
    plain = json.loads(run_nodmix(isolated_state, "sessions", "list", "--json").stdout)
    kinds = {row["key"]: (row["kind"], row["spawnedBy"]) for row in plain}
    assert kinds[tidy.child_key] == ("subagent", "agent:main:main")
    assert kinds["agent:main:main"] == ("main", None)

    shown = run_nodmix(isolated_state, "sessions", "show", tidy.child_key)
    assert shown.returncode == 0, shown.stderr
    assert f"subagent of agent:main:main  run {tidy.run_id} completed (depth 1)" in shown.stdout


@pytest.mark.integration
def test_sessions_show_says_why_a_subagent_did_not_complete(isolated_state: Path) -> None:
    with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        ran = run_nodmix(isolated_state, "agent", "--local", "-m", "spawn wait timeout=1: hang")
        assert ran.returncode == 0, ran.stderr
    (run,) = records(isolated_state)
    assert run.status == "timeout" and run.error
    shown = run_nodmix(isolated_state, "sessions", "show", run.child_key)
    assert shown.returncode == 0, shown.stderr
    assert f"run {run.run_id} timeout (depth 1): {run.error}" in shown.stdout
    raw = run_nodmix(isolated_state, "sessions", "show", run.child_key, "--json")
    assert json.loads(raw.stdout)["run"]["error"] == run.error
