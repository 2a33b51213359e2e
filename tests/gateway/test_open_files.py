"""A gateway under a low open-file limit serves thousands of sessions without running out.

The gateway runs as a real subprocess with its soft and hard `RLIMIT_NOFILE` both lowered to
256, so raising the soft limit at start-up cannot hide a descriptor per session; 3,000 named
sessions (distinct `user` fields) then go through `POST /v1/chat/completions`.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import anyio
import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.gateway.support import GatewayProcess, write_config
from tests.support.chat_load import one_turn_per_session
from tests.support.process import open_files

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOKEN = "fd-token-0123"
LIMIT = 256
SESSIONS = 3000
CONCURRENCY = 16


def _low_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


async def test_three_thousand_sessions_under_a_256_file_limit_give_no_errors(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(echo) as model:
        write_config(isolated_state, model.base_url)
        with GatewayProcess(
            isolated_state, "--token", TOKEN, preexec_fn=_low_file_limit
        ) as gateway:
            assert gateway.proc is not None
            pid = gateway.proc.pid
            with anyio.fail_after(240):
                errors = await one_turn_per_session(
                    gateway.url, TOKEN, range(SESSIONS), user_prefix="fd", concurrency=CONCURRENCY
                )
            files, _sockets = open_files(pid)
            code, stderr = gateway.stop()
    assert errors[:3] == [] and len(errors) == 0
    assert files <= 64, f"{files} files open after {SESSIONS} sessions"
    assert code == 0 and "Too many open files" not in stderr and "Traceback" not in stderr
    transcripts = list((isolated_state / "agents" / "main" / "sessions").glob("*.jsonl"))
    assert len(transcripts) == SESSIONS


def test_the_soft_open_file_limit_is_raised_to_the_hard_limit_at_start_up() -> None:
    from nodmix.runtime.limits import raise_open_file_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        lowered = min(128, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
        raised = raise_open_file_limit(cap=4096)
        expected = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
        assert raised == expected == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_cli_out_of_descriptors_ends_with_one_line_and_no_traceback(
    isolated_state: Path,
) -> None:
    import subprocess
    import sys

    # Every descriptor the limit allows is taken before the command runs: whatever fails
    # first (the event loop, reading the config) must fail as one line.
    script = (
        "import os, resource, sys\n"
        "from nodmix.cli.main import main\n"
        "import nodmix.runtime, nodmix.cli.agent\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "try:\n"
        "    while True: os.open(os.devnull, os.O_RDONLY)\n"
        "except OSError: pass\n"
        "sys.exit(main(['agent', '--local', '-m', 'hi']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "NODMIX_STATE_DIR": str(isolated_state)},
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Too many open files" in lines[0] and "ulimit -n" in lines[0]


def test_running_out_of_files_behind_a_transcript_error_is_a_503_saying_what_to_do() -> None:
    import errno

    from nodmix.errors import TranscriptError
    from nodmix.gateway.errors import classify

    try:
        raise OSError(errno.EMFILE, "Too many open files")
    except OSError as cause:
        try:
            raise TranscriptError(f"s.jsonl: cannot open for append: {cause}") from None
        except TranscriptError as exc:
            error = classify(exc)
    assert (error.status, error.code) == (503, "resource_exhausted")
    assert "Too many open files" in error.message and "ulimit -n" in error.message
    assert error.body()["error"]["type"] == "api_error"
