"""`nodmix security audit` on real config files and state dirs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodmix.cli.main import main
from nodmix.config.schema import NodmixConfig


@pytest.fixture(autouse=True)
def private_state(isolated_state: Path) -> Path:
    """The state dir as a careful user keeps it (0700), so each test adds one risk."""
    isolated_state.chmod(0o700)
    return isolated_state


def _config(state: Path, text: str) -> None:
    path = state / "nodmix.json"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)


def _audit(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, dict[str, Any]]]:
    code = main(["security", "audit", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is (code == 0)
    return code, {f["id"]: f for f in report["findings"]}


def test_a_default_install_has_only_the_unsandboxed_exec_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, findings = _audit(capsys)
    assert code == 0
    assert list(findings) == ["exec.unsandboxed"]
    assert findings["exec.unsandboxed"]["severity"] == "medium"
    assert "sandbox.mode" in findings["exec.unsandboxed"]["fix"]


def test_a_lan_gateway_without_a_token_is_high_and_fails_the_audit(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, "{gateway: {bind: 'lan'}}")
    code, findings = _audit(capsys)
    assert code == 1
    finding = findings["gateway.bind-without-token"]
    assert finding["severity"] == "high"
    assert "0.0.0.0" in finding["title"]
    assert "gateway.auth.token" in finding["fix"]
    # Reachable from the network, an unsandboxed exec is high too.
    assert findings["exec.unsandboxed"]["severity"] == "high"


def test_a_short_token_is_reported_and_a_long_one_from_the_environment_is_not(
    private_state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(private_state, "{gateway: {auth: {token: 'hunter2'}}}")
    code, findings = _audit(capsys)
    assert code == 0
    assert findings["gateway.short-token"]["severity"] == "medium"
    assert "7 characters" in findings["gateway.short-token"]["title"]

    monkeypatch.setenv("GW_TOKEN", "x" * 40)
    _config(private_state, "{gateway: {bind: 'lan', auth: {token: '${GW_TOKEN}'}}}")
    code, findings = _audit(capsys)
    assert "gateway.short-token" not in findings
    assert "gateway.bind-without-token" not in findings


def test_transcripts_readable_by_other_users_are_high(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript = private_state / "agents" / "main" / "sessions" / "s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("{}\n", encoding="utf-8")
    transcript.chmod(0o644)
    code, findings = _audit(capsys)
    assert code == 0
    assert findings["state.world-readable"]["severity"] == "low"  # the 0700 dir protects it

    private_state.chmod(0o755)
    for folder in transcript.parents:
        if folder == private_state:
            break
        folder.chmod(0o755)
    code, findings = _audit(capsys)
    assert code == 1
    finding = findings["state.world-readable"]
    assert finding["severity"] == "high"
    assert finding["fix"] == f"chmod -R go-rwx {private_state}"


def test_a_world_writable_file_in_the_state_dir_is_high(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, "{}")
    (private_state / "nodmix.json").chmod(0o666)
    code, findings = _audit(capsys)
    assert code == 1
    assert str(private_state / "nodmix.json") in findings["state.world-writable"]["detail"]


def test_a_plugin_in_a_folder_others_can_write_is_high(
    private_state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "helper.py").write_text("plugin = None\n", encoding="utf-8")
    shared.chmod(0o777)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    (mine / "tool.py").write_text("plugin = None\n", encoding="utf-8")
    _config(private_state, f"{{plugins: {{load: {{paths: ['{shared}/helper.py', '{mine}']}}}}}}")
    code, findings = _audit(capsys)
    assert code == 1
    finding = findings["plugins.writable-path"]
    assert finding["severity"] == "high"
    assert f"{shared}/helper.py" in finding["title"]
    assert f"{shared} is writable by group or others" in finding["detail"]
    assert str(mine) not in json.dumps(finding)


@pytest.mark.parametrize(
    "config",
    [
        "{agents: {defaults: {sandbox: {mode: 'non-main'}}}}",
        "{agents: {defaults: {sandbox: {mode: 'all'}}}}",
        "{tools: {deny: ['exec']}}",
    ],
)
def test_a_sandbox_or_a_denied_exec_clears_the_exec_finding(
    private_state: Path, config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, config)
    code, findings = _audit(capsys)
    assert code == 0
    assert "exec.unsandboxed" not in findings


def test_each_agent_is_checked_with_its_own_sandbox(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(
        private_state,
        "{agents: {defaults: {sandbox: {mode: 'non-main'}}, "
        "list: [{id: 'main'}, {id: 'ops', sandbox: {mode: 'off'}}]}}",
    )
    _code, findings = _audit(capsys)
    assert "'ops'" in findings["exec.unsandboxed"]["title"]


def test_private_network_fetching_is_noted(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, "{tools: {webFetch: {allowPrivateNetwork: true}}}")
    _code, findings = _audit(capsys)
    assert findings["webFetch.private-network"]["severity"] == "low"


def test_the_text_report_gives_each_finding_its_fix(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, "{gateway: {bind: 'lan'}}")
    code = main(["security", "audit"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[0] == "security audit: 2 high, 0 medium, 0 low"
    assert "[high] the gateway is configured to listen on 0.0.0.0 without a token" in out
    assert out.count("    fix: ") == 2


def test_doctor_shows_the_audit_summary(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, "{gateway: {bind: 'lan'}}")
    main(["doctor", "--json", "--offline"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert checks["security"]["level"] == "warn"
    assert checks["security"]["detail"].startswith("2 high, 0 medium, 0 low")
    assert "security audit" in checks["security"]["fix"]


def test_a_broken_config_is_one_line_and_exit_one(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, "{agents: {defaults: {sandbox: {mode: 'sometimes'}}}}")
    assert main(["security", "audit"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "nodmix.json" in err
    assert "agents.defaults.sandbox.mode" in err


def _needs_channels() -> None:
    if "channels" not in NodmixConfig.__struct_fields__:
        pytest.skip("the config has no channels section in this build")


def test_a_channel_open_to_anyone_is_high(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _needs_channels()
    _config(
        private_state,
        "{channels: {telegram: {botToken: '${TG_TOKEN}', dmPolicy: 'open', allowFrom: ['*'], "
        "groupPolicy: 'open'}}, agents: {defaults: {sandbox: {mode: 'non-main'}}}}",
    )
    code, findings = _audit(capsys)
    assert code == 1
    assert findings["channels.open-dm"]["fix"] == (
        'set channels.telegram.dmPolicy to "pairing" or "allowlist"'
    )
    assert findings["channels.open-groups"]["severity"] == "medium"
    assert "session.dmScope" in findings["channels.dm-in-main-session"]["fix"]


def test_a_paired_channel_with_per_peer_sessions_is_quiet(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _needs_channels()
    _config(
        private_state,
        "{channels: {telegram: {botToken: '${TG_TOKEN}', ownerIds: ['42']}}, "
        "session: {dmScope: 'per-peer'}, agents: {defaults: {sandbox: {mode: 'non-main'}}}}",
    )
    code, findings = _audit(capsys)
    assert code == 0
    assert not [f for f in findings if f.startswith("channels.")]


def test_a_sandbox_that_cannot_start_is_reported_with_the_reason(
    private_state: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _config(private_state, "{agents: {defaults: {sandbox: {mode: 'non-main'}}}}")
    code, findings = _audit(capsys)
    assert "sandbox.unavailable" not in findings  # bubblewrap works here

    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, findings = _audit(capsys)
    assert code == 0
    finding = findings["sandbox.unavailable"]
    assert finding["severity"] == "medium"
    assert "bubblewrap (bwrap) is not installed" in finding["detail"]


def test_a_config_file_outside_the_state_dir_with_literal_keys_must_be_private(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "etc" / "nodmix.json"
    config.parent.mkdir()
    config.write_text(
        "{models: {providers: {openai: {apiKey: 'sk-literal-key'}}}}", encoding="utf-8"
    )
    config.chmod(0o644)
    monkeypatch.setenv("NODMIX_CONFIG_PATH", str(config))
    code, findings = _audit(capsys)
    assert code == 1
    assert findings["config.exposed"]["fix"].startswith(f"chmod 600 {config}")

    config.write_text(
        "{models: {providers: {openai: {apiKey: '${OPENAI_API_KEY}'}}}}", encoding="utf-8"
    )
    code, findings = _audit(capsys)
    assert code == 0
    assert "config.exposed" not in findings


def test_a_sandbox_with_the_network_and_a_gateway_without_a_token_is_high(
    private_state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # with sandbox.network the sandbox shares the host's loopback: a token-less gateway there
    # runs owner turns (unsandboxed exec) for any sandboxed command that calls its API. A
    # gateway is token-less only with gateway.auth.mode "none" (else it makes its own token).
    sandbox = "agents: {defaults: {sandbox: {mode: 'non-main', network: true}}}"
    _config(private_state, "{" + sandbox + ", gateway: {auth: {mode: 'none'}}}")
    code, findings = _audit(capsys)
    assert code == 1
    finding = findings["sandbox.network-reaches-gateway"]
    assert finding["severity"] == "high" and "gateway.auth.token" in finding["fix"]

    _config(private_state, "{" + sandbox + "}")
    monkeypatch.setenv("NODMIX_GATEWAY_TOKEN", "t" * 40)
    code, findings = _audit(capsys)
    assert "sandbox.network-reaches-gateway" not in findings


def test_letting_other_senders_write_the_owners_instructions_is_reported(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(private_state, "{agents: {list: [{id: 'main', sandbox: {workspaceAccess: 'rw'}}]}}")
    _, findings = _audit(capsys)
    finding = findings["workspace.instructions-writable"]
    assert finding["severity"] == "medium" and "MEMORY.md" in finding["detail"]

    _config(private_state, "{agents: {defaults: {sandbox: {workspaceAccess: 'protected'}}}}")
    _, findings = _audit(capsys)
    assert "workspace.instructions-writable" not in findings


def test_an_mcp_server_run_from_an_agents_workspace_is_reported(
    private_state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Other senders may write ordinary workspace files; a server started from there runs
    # what they wrote with the owner's rights at the next start.
    workspace = tmp_path / "ws"
    (workspace / "tools").mkdir(parents=True)
    (workspace / "tools" / "server.py").write_text("print()\n", encoding="utf-8")
    servers = {
        "script": f"{{command: 'python3', args: ['{workspace}/tools/server.py']}}",
        "relative": f"{{command: 'python3', args: ['tools/server.py'], cwd: '{workspace}'}}",
        "cwd": f"{{command: 'npx', args: ['some-server'], cwd: '{workspace}/tools'}}",
        "files": f"{{command: 'npx', args: ['server-filesystem', '{workspace}']}}",
    }
    for name, server in servers.items():
        _config(
            private_state,
            f"{{agents: {{defaults: {{workspace: '{workspace}'}}}}, "
            f"mcp: {{servers: {{{name}: {server}}}}}}}",
        )
        _, findings = _audit(capsys)
        finding = findings["mcp.server-in-workspace"]
        assert finding["severity"] == "medium" and f"mcp.servers.{name}" in finding["title"]
    _config(
        private_state,
        f"{{agents: {{defaults: {{workspace: '{workspace}'}}}}, mcp: {{servers: {{"
        f"files: {{command: 'npx', args: ['server-filesystem', '{tmp_path}/elsewhere']}}}}}}}}",
    )
    _, findings = _audit(capsys)
    assert "mcp.server-in-workspace" not in findings
