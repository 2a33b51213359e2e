"""`nodmix cron` without a gateway: jobs are added, shown, edited, paused and removed in the
state directory; mistakes are one line and a non-zero exit; `cron run` runs a job here."""

from __future__ import annotations

import json
from pathlib import Path

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.automation.support import user_texts, write_config
from tests.gateway.support import run_nodmix


def _ok(state: Path, *args: str) -> str:
    done = run_nodmix(state, "cron", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_jobs_are_added_edited_paused_and_removed_in_the_state_dir(isolated_state: Path) -> None:
    added = _ok(
        isolated_state,
        *("add", "--name", "morning", "--cron", "0 7 * * *", "--tz", "Europe/Paris"),
        *("--message", "plan my day", "--json"),
    )
    job = json.loads(added)
    assert job["when"] == "cron 0 7 * * * (Europe/Paris)"
    assert (isolated_state / "automation" / "jobs.json").is_file()

    listed = json.loads(_ok(isolated_state, "list", "--json"))["jobs"]
    assert [j["id"] for j in listed] == [job["id"]] and listed[0]["nextRunAt"] > 0

    _ok(isolated_state, "edit", job["id"], "--tz", "Asia/Tokyo")
    shown = json.loads(_ok(isolated_state, "show", job["id"], "--json"))
    assert shown["when"] == "cron 0 7 * * * (Asia/Tokyo)"
    _ok(isolated_state, "edit", job["id"], "--every", "45m", "--message", "plan it")
    shown = json.loads(_ok(isolated_state, "show", "morning", "--json"))
    assert shown["when"] == "every 45m" and shown["message"] == "plan it"

    _ok(isolated_state, "disable", job["id"])
    assert "disabled" in _ok(isolated_state, "list")
    _ok(isolated_state, "enable", job["id"])
    assert "disabled" not in _ok(isolated_state, "list")
    _ok(isolated_state, "remove", job["id"])
    assert "No cron jobs" in _ok(isolated_state, "list")


def test_mistakes_are_one_line_with_a_non_zero_exit(isolated_state: Path) -> None:
    cases = [
        (["add", "--name", "x", "--cron", "61 * * * *", "--message", "m"], "invalid cron"),
        (["add", "--name", "x", "--every", "soon", "--message", "m"], "invalid duration"),
        (["add", "--name", "x", "--at", "2001-01-01T00:00", "--message", "m"], "in the past"),
        (
            ["add", "--name", "x", "--every", "1h", "--message", "m", "--deliver", "sms:1"],
            "channel 'sms' is not configured",
        ),
        (
            ["add", "--name", "x", "--every", "1h", "--message", "m"]
            + ["--deliver", "session:agent:"],
            "invalid delivery target 'session:agent:'",
        ),
        (
            ["add", "--name", "x", "--every", "1h", "--message", "m", "--agent", "main"]
            + ["--deliver", "session:agent:ops:main"],
            "the session belongs to agent 'ops', not 'main'",
        ),
        (["show", "nope"], "no cron job 'nope'"),
        (["runs", "nope"], "no cron job 'nope' and no runs recorded under that id"),
    ]
    for args, expected in cases:
        done = run_nodmix(isolated_state, "cron", *args)
        assert done.returncode == 1, args
        assert expected in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_cron_run_runs_the_job_now_without_a_gateway(isolated_state: Path) -> None:
    with ScriptedModelServer(echo) as model:
        write_config(isolated_state, model.base_url)
        job = json.loads(
            _ok(
                isolated_state,
                "add",
                "--name",
                "n",
                "--every",
                "1d",
                "--message",
                "hello",
                "--json",
            )
        )
        out = _ok(isolated_state, "run", job["id"])
        assert "ok in" in out and "hello" in out
        assert user_texts(model) == ["hello"]
        runs = json.loads(_ok(isolated_state, "runs", job["id"], "--json"))["runs"]
        assert [r["trigger"] for r in runs] == ["manual"]
        assert "never ran" not in _ok(isolated_state, "list")  # cron list shows that run
        assert "last ok" in _ok(isolated_state, "list")
        (listed,) = json.loads(_ok(isolated_state, "list", "--json"))["jobs"]
        assert (listed["lastStatus"], listed["lastRunAt"]) == ("ok", runs[0]["startedAt"])
        _ok(isolated_state, "remove", job["id"])
        kept = json.loads(_ok(isolated_state, "runs", job["id"], "--json"))["runs"]
        assert kept == runs  # a removed job's history is still found by its id


def test_a_job_delivered_into_a_session_appends_its_reply_there_without_a_gateway(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(echo) as model:
        write_config(isolated_state, model.base_url)
        added = _ok(
            isolated_state,
            *("add", "--name", "tea", "--every", "1d", "--message", "time for tea"),
            *("--deliver", "session", "--json"),
        )
        job = json.loads(added)
        assert job["deliver"] == "session:main"
        assert "-> session:main" in _ok(isolated_state, "list")
        _ok(isolated_state, "run", job["id"])
        shown = run_nodmix(isolated_state, "sessions", "show", "main")
        assert shown.returncode == 0, shown.stderr
        assert f"cron:{job['id']}" in shown.stdout and "time for tea" in shown.stdout
        assert user_texts(model) == ["time for tea"]  # no turn ran in the main session
