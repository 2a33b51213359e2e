"""`nodmix doctor` reports what is wrong and how to fix it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.cli.main import main
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(lambda request: ModelReply.text("ok"), api_key="sekret") as server:
        yield server


def _config(state: Path, text: str) -> None:
    (state / "nodmix.json").write_text(text, encoding="utf-8")


def _doctor(
    capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, dict[str, str]]]:
    code = main(["doctor", "--json", *args])
    findings = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    return code, findings


def _provider(base_url: str, key: str) -> str:
    return (
        f"{{models: {{providers: {{local: {{api: 'openai-completions', baseUrl: '{base_url}', "
        f"apiKey: '{key}', models: [{{id: 'm'}}]}}}}}}, "
        "agents: {defaults: {model: {primary: 'local/m'}}}}"
    )


def test_healthy_setup_passes(
    isolated_state: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, _provider(model_server.base_url, "sekret"))
    code, findings = _doctor(capsys)
    assert code == 0
    assert findings["model local/m"]["level"] == "ok"
    assert findings["context engine"]["detail"].startswith("legacy")
    assert findings["code-mode runtime"]["level"] == "ok"


def test_wrong_key_and_missing_key_are_errors_with_fixes(
    isolated_state: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, _provider(model_server.base_url, "wrong"))
    code, findings = _doctor(capsys)
    assert code == 1 and "rejected the API key" in findings["model local/m"]["detail"]
    _config(isolated_state, "{agents: {defaults: {model: {primary: 'openai/gpt-4.1-mini'}}}}")
    code, findings = _doctor(capsys)
    check = findings["model openai/gpt-4.1-mini"]
    assert code == 1 and "OPENAI_API_KEY" in check["fix"]


def test_invalid_config_is_reported_not_raised(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, "{tools: {deny: 'exec'}}")
    code, findings = _doctor(capsys)
    assert code == 1 and "tools.deny" in findings["config"]["detail"]


def test_unknown_context_engine_names_the_slot_and_the_fix(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, "{plugins: {slots: {contextEngine: 'lossless'}}}")
    code, findings = _doctor(capsys, "--offline")
    assert code == 1
    assert "lossless" in findings["context engine"]["detail"]
    assert "legacy" in findings["context engine"]["fix"]


def test_an_mcp_server_whose_command_does_not_exist_is_an_error_without_deep(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(
        isolated_state,
        "{mcp: {servers: {gone: {command: '/nonexistent/mcp-server'}, "
        "typo: {command: 'no-such-mcp-server-here'}, "
        f"fine: {{command: '{sys.executable}', args: ['-m', 'mcp_server_time']}}}}}}}}",
    )
    code, findings = _doctor(capsys, "--offline")
    assert code == 1
    assert findings["mcp gone"]["detail"] == "command not found: /nonexistent/mcp-server"
    assert "not found on PATH" in findings["mcp typo"]["detail"]
    assert "mcp.servers.typo.command" in findings["mcp typo"]["fix"]
    assert "mcp fine" not in findings
    assert findings["mcp servers"]["level"] == "ok"


def test_broken_plugin_is_an_error_with_its_message(
    isolated_state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no luck')\n", encoding="utf-8")
    _config(isolated_state, f"{{plugins: {{load: {{paths: ['{broken}']}}}}}}")
    code, findings = _doctor(capsys, "--offline")
    assert code == 1 and "no luck" in findings["plugin broken"]["detail"]


def test_missing_sandbox_runtime_is_reported_with_the_install_command(
    isolated_state: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("NODMIX_CACHE_DIR", str(tmp_path / "empty-cache"))
    code, findings = _doctor(capsys, "--offline")
    runtime = findings["code-mode runtime"]
    assert runtime["level"] == "warn" and "nodmix sandbox install" in runtime["fix"]
    assert code == 0  # code mode is off by default, so a missing runtime is not an error


def _anthropic(base_url: str, key: str) -> str:
    provider = (
        f"claude: {{api: 'anthropic-messages', baseUrl: '{base_url}', apiKey: '{key}', "
        "models: [{id: 'm'}]}"
    )
    agents = "agents: {defaults: {model: {primary: 'claude/m'}}}"
    return f"{{models: {{providers: {{{provider}}}}}, {agents}}}"


def test_anthropic_protocol_endpoint_is_probed_at_its_model_list(
    isolated_state: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(isolated_state, _anthropic(model_server.anthropic_base_url, "sekret"))
    code, findings = _doctor(capsys)
    assert code == 0 and findings["model claude/m"]["level"] == "ok"
    _config(isolated_state, _anthropic(model_server.anthropic_base_url, "wrong"))
    code, findings = _doctor(capsys)
    assert code == 1 and "rejected the API key" in findings["model claude/m"]["detail"]


@pytest.mark.integration
def test_an_installed_runtime_is_proven_by_running_a_sandbox_cell(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nodmix.sandbox import assets

    if not assets.status().installed:
        assets.install()
    code, findings = _doctor(capsys, "--offline")
    assert findings["code-mode runtime"]["level"] == "ok"
    assert "a sandbox cell ran" in findings["code-mode runtime"]["detail"]
    assert findings["code-mode TypeScript"]["level"] == "ok"
    assert code == 0


def test_a_corrupt_runtime_is_an_error_with_the_force_fix(
    isolated_state: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from nodmix.sandbox import assets

    monkeypatch.setenv("NODMIX_CACHE_DIR", str(tmp_path / "cache"))
    wasm = assets.quickjs_wasm_path()
    wasm.parent.mkdir(parents=True)
    wasm.write_bytes(b"\0asm not the runtime")
    code, findings = _doctor(capsys, "--offline")
    runtime = findings["code-mode runtime"]
    assert runtime["level"] == "error" and "--force" in runtime["fix"]
    assert code == 1


@pytest.mark.integration
def test_a_missing_python_package_is_reported_as_one_finding_with_the_fix(
    isolated_state: Path,
) -> None:
    """A plain install that lacks a package code mode imports: doctor must not say ✓."""
    program = textwrap.dedent(
        """
        import sys

        class WithoutSniffio:  # the interpreter's real import system, minus one package
            def find_spec(self, name, path=None, target=None):
                if name == "sniffio":
                    raise ModuleNotFoundError("No module named 'sniffio'", name="sniffio")

        sys.meta_path.insert(0, WithoutSniffio())
        from nodmix.cli.main import main
        sys.exit(main(["doctor", "--offline"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1, done.stderr
    assert "✗ code-mode modules: cannot import" in done.stdout
    assert "'sniffio' is missing" in done.stdout
    assert "fix: `pip install sniffio`" in done.stdout
    assert "Traceback" not in done.stderr
