"""A sandboxed session's `exec` under real bubblewrap: what it can and cannot reach."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from nodmix.errors import ToolError
from nodmix.security.sandbox.bwrap import bwrap_argv
from nodmix.security.sandbox.policy import SandboxSettings
from nodmix.security.sandbox.session import SessionSandbox
from nodmix.tools.core.exec import ExecTool
from tests.security.conftest import SECRET_KEY, context, make_sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def sandbox(isolated_state: Path, home: Path, bwrap: str) -> SessionSandbox:
    return make_sandbox(isolated_state, home, bwrap)


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on 127.0.0.1 that records every connection it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    accepted: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            accepted.append(f"{peer[0]}:{peer[1]}")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(timeout=5)
    server.close()


async def test_exec_in_a_non_main_session_writes_the_workspace_and_nothing_else(
    sandbox: SessionSandbox, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    command = f"echo inside > note.txt; echo escaped > {outside}/x.txt; touch /usr/x; echo done"
    result = await ExecTool(isolation=sandbox).call({"command": command}, context(workspace))
    assert result.details["sandboxed"] is True
    assert (workspace / "note.txt").read_text(encoding="utf-8") == "inside\n"
    assert not (outside / "x.txt").exists()
    assert "Read-only file system" in result.text_content
    assert "done" in result.text_content


async def test_exec_in_the_main_session_is_not_sandboxed_under_non_main(
    sandbox: SessionSandbox, workspace: Path, home: Path
) -> None:
    result = await ExecTool(isolation=sandbox).call(
        {"command": f"cat {home}/.ssh/id_ed25519"}, context(workspace, session="main")
    )
    assert result.details["sandboxed"] is False
    assert SECRET_KEY in result.text_content


async def test_sandboxed_exec_cannot_read_the_home_ssh_keys_or_the_state_dir(
    sandbox: SessionSandbox, workspace: Path, home: Path, isolated_state: Path
) -> None:
    (isolated_state / "nodmix.json").write_text('{"gateway": {}}', encoding="utf-8")
    command = (
        f"cat {home}/.ssh/id_ed25519; ls {isolated_state}; cat {isolated_state}/nodmix.json; "
        "cat ~/.ssh/id_ed25519; ls /root; echo HOME=$HOME"
    )
    result = await ExecTool(isolation=sandbox).call({"command": command}, context(workspace))
    assert result.details["sandboxed"] is True
    assert SECRET_KEY not in result.text_content
    assert "gateway" not in result.text_content
    assert "No such file or directory" in result.text_content
    assert f"HOME={workspace}" in result.text_content


async def test_sandboxed_exec_gets_a_scrubbed_environment(
    sandbox: SessionSandbox, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODMIX_TEST_API_KEY", "sk-should-not-leak")
    result = await ExecTool(isolation=sandbox).call({"command": "env"}, context(workspace))
    assert not result.is_error
    assert "sk-should-not-leak" not in result.text_content
    assert "NODMIX_STATE_DIR" not in result.text_content
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in result.text_content


async def test_sandboxed_exec_cannot_reach_a_server_on_loopback(
    sandbox: SessionSandbox, workspace: Path, listener: tuple[int, list[str]]
) -> None:
    port, accepted = listener
    probe = f"echo > /dev/tcp/127.0.0.1/{port} && echo CONNECTED"
    unsandboxed = await ExecTool().call({"command": probe}, context(workspace))
    assert "CONNECTED" in unsandboxed.text_content  # the server is reachable from outside
    deadline = time.monotonic() + 10
    while not accepted and time.monotonic() < deadline:
        time.sleep(0.01)
    seen = len(accepted)
    assert seen == 1

    result = await ExecTool(isolation=sandbox).call({"command": probe}, context(workspace))
    assert result.is_error
    assert "CONNECTED" not in result.text_content
    assert len(accepted) == seen


async def test_network_true_shares_the_host_network(
    isolated_state: Path, home: Path, bwrap: str, workspace: Path, listener: tuple[int, list[str]]
) -> None:
    port, _accepted = listener
    sandbox = make_sandbox(isolated_state, home, bwrap, network=True)
    result = await ExecTool(isolation=sandbox).call(
        {"command": f"echo > /dev/tcp/127.0.0.1/{port} && echo CONNECTED"}, context(workspace)
    )
    assert "CONNECTED" in result.text_content


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


async def test_a_background_process_dies_when_the_sandboxed_command_returns(
    sandbox: SessionSandbox, workspace: Path
) -> None:
    token = f"nodmix-bg-{uuid.uuid4().hex[:8]}"
    command = f"bash -c 'exec -a {token} sleep 300' & sleep 0.2; echo started"
    result = await ExecTool(isolation=sandbox).call({"command": command}, context(workspace))
    assert "started" in result.text_content
    deadline = time.monotonic() + 10
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _processes_with(token) == []


async def test_a_timed_out_sandboxed_command_is_killed_with_its_children(
    sandbox: SessionSandbox, workspace: Path
) -> None:
    token = f"nodmix-to-{uuid.uuid4().hex[:8]}"
    command = f"bash -c 'exec -a {token} sleep 300' & wait"
    result = await ExecTool(isolation=sandbox).call(
        {"command": command, "timeout": 1}, context(workspace)
    )
    assert result.details["timedOut"] is True
    deadline = time.monotonic() + 10
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _processes_with(token) == []


async def test_the_file_size_limit_applies_inside_the_sandbox(
    isolated_state: Path, home: Path, bwrap: str, workspace: Path
) -> None:
    sandbox = make_sandbox(isolated_state, home, bwrap, file_size_bytes=64 * 1024)
    result = await ExecTool(isolation=sandbox).call(
        {"command": "head -c 1000000 /dev/zero > big.bin"}, context(workspace)
    )
    assert result.is_error
    assert (workspace / "big.bin").stat().st_size <= 64 * 1024


async def test_the_sandbox_tmp_holds_at_most_the_file_size_limit_in_total(
    isolated_state: Path, home: Path, bwrap: str, workspace: Path
) -> None:
    # /tmp is memory (tmpfs): without a size, many files each under the file size limit
    # could take half the machine's RAM
    sandbox = make_sandbox(isolated_state, home, bwrap, file_size_bytes=1024 * 1024)
    command = (
        "for i in 1 2 3 4; do head -c 600000 /dev/zero > /tmp/f$i || exit 3; done; echo filled"
    )
    result = await ExecTool(isolation=sandbox).call({"command": command}, context(workspace))
    assert result.is_error
    assert "filled" not in result.text_content
    assert "No space left on device" in result.text_content


async def test_without_bubblewrap_the_command_does_not_run_and_the_fix_is_named(
    isolated_state: Path, home: Path, workspace: Path, tmp_path: Path
) -> None:
    sandbox = make_sandbox(isolated_state, home, str(tmp_path / "missing" / "bwrap"))
    with pytest.raises(ToolError) as failure:
        await ExecTool(isolation=sandbox).call({"command": "touch ran.txt"}, context(workspace))
    assert not (workspace / "ran.txt").exists()
    text = str(failure.value)
    assert "\n" not in text
    assert "bubblewrap" in text
    assert "sandbox.mode" in text


async def test_a_sandbox_that_cannot_start_fails_closed_with_the_reason(
    isolated_state: Path, home: Path, workspace: Path, tmp_path: Path
) -> None:
    # A bwrap that cannot create namespaces prints its reason and exits 1, like this one.
    broken = tmp_path / "bin" / "bwrap"
    broken.parent.mkdir()
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
        encoding="utf-8",
    )
    broken.chmod(0o755)
    sandbox = make_sandbox(isolated_state, home, str(broken))
    with pytest.raises(ToolError) as failure:
        await ExecTool(isolation=sandbox).call({"command": "touch ran.txt"}, context(workspace))
    assert not (workspace / "ran.txt").exists()
    assert "No permissions to create new namespace" in str(failure.value)
    assert "user namespaces" in str(failure.value)


async def test_a_workspace_containing_the_home_directory_is_refused(
    isolated_state: Path, home: Path, bwrap: str
) -> None:
    sandbox = make_sandbox(isolated_state, home, bwrap)
    with pytest.raises(ToolError, match="contains .*which the sandbox must hide"):
        await ExecTool(isolation=sandbox).call(
            {"command": "cat .ssh/id_ed25519"}, context(home.parent)
        )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root to switch to an unprivileged user (setpriv)",
)
async def test_the_sandbox_also_starts_for_an_unprivileged_user(bwrap: str) -> None:
    # The gateway may run as a normal user: bubblewrap then builds its namespaces through an
    # unprivileged user namespace. Run the same command line as `nobody`.
    workspace = Path(tempfile.mkdtemp(prefix="nodmix-sandbox-user-"))
    try:
        workspace.chmod(0o777)
        argv = bwrap_argv(
            bwrap, SandboxSettings(mode="all"), workspace, ("/bin/sh", "-c", "id -u > who.txt")
        )
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        done = await anyio.run_process([*nobody, *argv], check=False)
        assert done.returncode == 0, done.stderr.decode()
        assert (workspace / "who.txt").read_text(encoding="utf-8").strip() == "65534"
    finally:
        shutil.rmtree(workspace)


async def test_a_background_command_is_refused_in_a_sandboxed_session(
    sandbox: SessionSandbox, workspace: Path
) -> None:
    with pytest.raises(ToolError, match="not available in a sandboxed session"):
        await ExecTool(isolation=sandbox).call(
            {"command": "touch ran.txt", "background": True}, context(workspace)
        )
    assert not (workspace / "ran.txt").exists()


async def test_sandboxed_exec_sees_ca_certificates_but_not_system_secrets(
    sandbox: SessionSandbox, workspace: Path
) -> None:
    command = "ls /etc/ssl; ls /etc/ssl/certs | head -1; ls /etc/shadow /etc/ssl/private"
    result = await ExecTool(isolation=sandbox).call({"command": command}, context(workspace))
    text = result.text_content
    assert "certs" in text
    assert "cannot access '/etc/shadow'" in text
    assert "cannot access '/etc/ssl/private'" in text
