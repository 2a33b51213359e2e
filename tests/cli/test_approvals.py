"""Exec approvals from the command line: the y/n/always prompt of an in-process turn (real CLI
subprocesses, answers piped on stdin) and `nodmix approvals list|allow|revoke`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

from ..gateway.support import GatewayProcess, write_config
from ..security.support import exec_policy, shell_model


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(shell_model) as running:
        yield running


@pytest.fixture
def guarded(isolated_state: Path, server: ScriptedModelServer) -> Path:
    write_config(isolated_state, server.base_url, exec_policy())
    return isolated_state


def test_answering_yes_runs_the_command_and_the_prompt_names_what_is_asked(
    guarded: Path,
) -> None:
    done = run_nodmix(guarded, "agent", "--local", "-m", "run echo approved-$((6*7))", stdin="y\n")
    assert done.returncode == 0, done.stderr
    assert "Approval needed (the command uses expansion)" in done.stderr
    assert "session agent:main:main" in done.stderr
    assert "echo approved-$((6*7))" in done.stderr
    assert "Run it? [y]es / [n]o / [a]lways allow:" in done.stderr
    assert "tool said: approved-42" in done.stdout


def test_answering_no_refuses_and_the_model_reads_a_clear_refusal(guarded: Path) -> None:
    marker = guarded / "should-not-exist"
    done = run_nodmix(guarded, "agent", "--local", "-m", f"run touch {marker}", stdin="n\n")
    assert done.returncode == 0, done.stderr
    assert "tool said: Not run: the user denied this command (terminal)" in done.stdout
    assert not marker.exists()


def test_end_of_input_counts_as_no(guarded: Path) -> None:
    done = run_nodmix(guarded, "agent", "--local", "-m", "run echo hi", stdin="")
    assert "tool said: Not run: the user denied" in done.stdout


def test_always_allow_persists_a_pattern_that_later_commands_match_without_asking(
    guarded: Path,
) -> None:
    first = run_nodmix(guarded, "agent", "--local", "-m", "run echo again", stdin="a\n")
    assert "tool said: again" in first.stdout, first.stderr
    listed = json.loads(run_nodmix(guarded, "approvals", "list", "--json").stdout)
    assert [p["pattern"] for p in listed["patterns"]] == ["echo again"]
    assert listed["patterns"][0]["agent"] == "main"
    second = run_nodmix(guarded, "agent", "--local", "-m", "run echo again", stdin="")
    assert "tool said: again" in second.stdout
    assert "Approval needed" not in second.stderr


def test_allow_list_and_revoke_manage_the_persisted_allowlist(guarded: Path) -> None:
    added = run_nodmix(guarded, "approvals", "allow", "printf **")
    assert added.returncode == 0 and "allowed for every agent: printf **" in added.stdout
    ran = run_nodmix(guarded, "agent", "--local", "-m", "run printf 'a b'", stdin="")
    assert "tool said: a b" in ran.stdout and "Approval needed" not in ran.stderr
    # a compound command runs without asking only if every part matches
    mixed = run_nodmix(guarded, "agent", "--local", "-m", "run printf x; id", stdin="n\n")
    assert "Approval needed (the command is not on the exec allowlist)" in mixed.stderr
    listing = run_nodmix(guarded, "approvals", "list").stdout
    pattern_id = listing.split()[0]
    revoked = run_nodmix(guarded, "approvals", "revoke", pattern_id)
    assert revoked.returncode == 0 and "revoked: printf **" in revoked.stdout
    assert "allowlist is empty" in run_nodmix(guarded, "approvals", "list").stdout
    again = run_nodmix(guarded, "agent", "--local", "-m", "run printf z", stdin="n\n")
    assert "Approval needed" in again.stderr


def test_bad_patterns_and_unknown_ids_are_one_line_errors(guarded: Path) -> None:
    bad = run_nodmix(guarded, "approvals", "allow", "ls 'unclosed")
    assert bad.returncode == 1
    assert bad.stderr.strip().startswith('nodmix: error: pattern "ls \'unclosed" cannot be parsed')
    assert "Traceback" not in bad.stderr
    compound = run_nodmix(guarded, "approvals", "allow", "ls ; rm")
    assert compound.returncode == 1 and "is one command" in compound.stderr
    opaque = run_nodmix(guarded, "approvals", "allow", "ls $(whoami)")
    assert opaque.returncode == 1 and "would never match" in opaque.stderr
    assert "allowlist is empty" in run_nodmix(guarded, "approvals", "list").stdout
    unknown = run_nodmix(guarded, "approvals", "revoke", "nope")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "nodmix: error: no pattern with id or text 'nope'"


def test_a_turn_run_in_the_gateway_is_asked_on_the_terminal_that_sent_it(
    guarded: Path,
) -> None:
    with GatewayProcess(guarded) as gateway:
        yes = run_nodmix(
            guarded, "agent", "--url", gateway.url, "-m", "run echo via-gw", stdin="y\n"
        )
        no = run_nodmix(guarded, "agent", "--url", gateway.url, "-m", "run echo nope", stdin="n\n")
    assert yes.returncode == 0, yes.stderr
    assert "Approval needed (the command is not on the exec allowlist)" in yes.stderr
    assert "tool said: via-gw" in yes.stdout
    assert "tool said: Not run: the user denied this command (websocket)" in no.stdout


def test_an_unanswered_prompt_times_out_and_the_command_is_refused(
    isolated_state: Path, server: ScriptedModelServer
) -> None:
    write_config(isolated_state, server.base_url, exec_policy(timeout=1))
    marker = isolated_state / "timed-out"
    env = {
        **os.environ,
        "NODMIX_STATE_DIR": str(isolated_state),
        "NODMIX_CONFIG_PATH": str(isolated_state / "nodmix.json"),
    }
    with subprocess.Popen(
        [sys.executable, "-m", "nodmix", "agent", "--local", "-m", f"run touch {marker}"],
        stdin=subprocess.PIPE,  # kept open and silent: nobody answers
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        out, err = _wait_silent(proc)
    assert proc.returncode == 0, err
    assert "tool said: Not run: nobody approved it within 1 s" in out
    assert "timed out: the command was not run" in err
    assert not marker.exists()


def _wait_silent(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Wait for the process without ever writing to or closing its stdin."""
    assert proc.stdout is not None and proc.stderr is not None
    proc.wait(timeout=60)
    return proc.stdout.read(), proc.stderr.read()
