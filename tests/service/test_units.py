"""The gateway's user service: the unit and plist as written, and the commands each action runs."""

from __future__ import annotations

import json
import plistlib
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from nodmix.service.manager import service_manager, shown
from nodmix.service.units import gateway_spec, launchd_plist, systemd_unit
from tests.gateway.support import run_nodmix

PYTHON = "/opt/my env/bin/python"


def test_systemd_unit_runs_this_python_with_the_state_env_and_restarts_on_failure() -> None:
    env = {"NODMIX_STATE_DIR": "/srv/nodmix state", "OPENAI_API_KEY": "sk-secret", "HOME": "/h"}
    unit = systemd_unit(gateway_spec(PYTHON, ["--port", "18790"], env))
    lines = unit.splitlines()
    assert 'ExecStart="/opt/my env/bin/python" -m nodmix gateway --port 18790' in lines
    assert 'Environment="NODMIX_STATE_DIR=/srv/nodmix state"' in lines
    assert "Restart=on-failure" in lines and "WantedBy=default.target" in lines
    assert "sk-secret" not in unit  # secrets stay in the config, not the unit


def test_launchd_plist_has_the_label_arguments_environment_and_log() -> None:
    spec = gateway_spec(PYTHON, [], {"NODMIX_STATE_DIR": "/s"}, log_file=Path("/s/logs/g.out"))
    plist = plistlib.loads(launchd_plist(spec))
    assert plist["Label"] == "dev.nodmix.gateway"
    assert plist["ProgramArguments"] == [PYTHON, "-m", "nodmix", "gateway"]
    assert plist["EnvironmentVariables"] == {"NODMIX_STATE_DIR": "/s"}
    assert plist["RunAtLoad"] is True and plist["StandardErrorPath"] == "/s/logs/g.out"


def test_each_manager_puts_its_file_in_the_users_place_and_names_its_commands(
    tmp_path: Path,
) -> None:
    linux = service_manager({"HOME": str(tmp_path)}, platform="linux")
    mac = service_manager({"HOME": str(tmp_path)}, platform="darwin")
    assert linux.path == tmp_path / ".config/systemd/user/nodmix-gateway.service"
    assert mac.path == tmp_path / "Library/LaunchAgents/dev.nodmix.gateway.plist"
    assert shown(linux.commands("install")) == (
        "systemctl --user daemon-reload && systemctl --user enable --now nodmix-gateway.service"
    )
    assert linux.commands("restart") == [
        ["systemctl", "--user", "restart", "nodmix-gateway.service"]
    ]
    assert mac.commands("install")[0][:2] == ["launchctl", "bootstrap"]
    assert mac.commands("restart")[0][:3] == ["launchctl", "kickstart", "-k"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_installed_unit_passes_systemd_analyze_verify(
    isolated_state: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    installed = run_nodmix(
        isolated_state, "gateway", "install", "--port", "18790", env={"HOME": str(home)}
    )
    unit = home / ".config/systemd/user/nodmix-gateway.service"
    verified = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr


def test_install_status_and_uninstall_where_systemd_is_not_running(
    isolated_state: Path, tmp_path: Path
) -> None:
    if service_manager().available:
        pytest.skip("systemd runs here: install would really enable a service")
    env = {"HOME": str(tmp_path / "home")}
    # A port nothing listens on: a gateway someone runs on the default port is not this one.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (isolated_state / "nodmix.json").write_text(json.dumps({"gateway": {"port": port}}))
    unit = tmp_path / "home/.config/systemd/user/nodmix-gateway.service"
    installed = run_nodmix(isolated_state, "gateway", "install", env=env)
    status = run_nodmix(isolated_state, "gateway", "status", "--json", env=env)
    restart = run_nodmix(isolated_state, "gateway", "restart", env=env)
    removed = run_nodmix(isolated_state, "gateway", "uninstall", env=env)
    assert installed.returncode == 0 and f"wrote {unit}" in installed.stdout
    assert "systemctl --user enable --now nodmix-gateway.service" in installed.stdout
    report = json.loads(status.stdout)
    assert report["installed"] is True and report["managerRunning"] is False
    assert report["gateway"]["running"] is False
    assert restart.returncode == 1 and "not running on this machine" in restart.stderr
    assert removed.returncode == 0 and not unit.exists()
