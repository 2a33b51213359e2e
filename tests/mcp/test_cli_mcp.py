"""`nodmix mcp …`: the commands, their config edits, and their one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import everything_bin

from nodmix.cli.main import main
from nodmix.invocation import command


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["mcp", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _config(state: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((state / "nodmix.json").read_text(encoding="utf-8"))
    return data


def _add_everything(capsys: pytest.CaptureFixture[str], *extra: str) -> None:
    code, _, err = _run(
        capsys,
        "add",
        "every",
        "--command",
        everything_bin(),
        "--arg",
        "stdio",
        "--no-probe",
        *extra,
    )
    assert code == 0, err


def test_list_says_when_nothing_is_configured(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "list") == (
        0,
        f"no MCP servers configured (add one with `{command('mcp add')}`)\n",
        "",
    )
    assert _run(capsys, "list", "--json") == (0, "[]\n", "")


@pytest.mark.integration
def test_add_probes_the_server_and_saves_it(
    capsys: pytest.CaptureFixture[str], isolated_state: Path
) -> None:
    code, out, err = _run(
        capsys,
        "add",
        "every",
        "--command",
        everything_bin(),
        "--arg",
        "stdio",
        "--timeout-ms",
        "9000",
    )
    assert (code, err) == (0, "")
    assert out.startswith(f"added MCP server 'every' to {isolated_state / 'nodmix.json'} (")
    assert "13 tools, probed in" in out
    assert _config(isolated_state) == {
        "mcp": {
            "servers": {
                "every": {"command": everything_bin(), "args": ["stdio"], "timeoutMs": 9000}
            }
        }
    }


@pytest.mark.integration
def test_add_saves_nothing_when_the_probe_fails(
    capsys: pytest.CaptureFixture[str], isolated_state: Path
) -> None:
    code, out, err = _run(capsys, "add", "ghost", "--command", "nodmix-no-such-server")
    assert (code, out) == (1, "")
    assert err == (
        "nodmix: error: probe failed, nothing saved: MCP server 'ghost' failed to start: "
        "command not found on PATH: nodmix-no-such-server (use --no-probe to save anyway)\n"
    )
    assert not (isolated_state / "nodmix.json").exists()


def test_add_without_probe_saves_a_remote_server(
    capsys: pytest.CaptureFixture[str], isolated_state: Path
) -> None:
    code, out, _ = _run(
        capsys,
        "add",
        "docs",
        "--url",
        "https://mcp.example.com/mcp",
        "--header",
        "Authorization=${DOCS_TOKEN}",
        "--transport",
        "sse",
        "--disabled",
    )
    assert code == 0
    assert out.endswith("(not probed)\n")
    assert _config(isolated_state)["mcp"] == {
        "servers": {
            "docs": {
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": "${DOCS_TOKEN}"},
                "transport": "sse",
                "enabled": False,
            }
        }
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["1st", "--command", "x"], "invalid server name '1st': use a letter, then letters"),
        (["a.b", "--command", "x"], "invalid server name 'a.b'"),
        (["s", "--command", "x", "--header", "A=1"], "--header only apply to remote servers"),
        (["s", "--url", "http://h/mcp", "--arg", "x"], "--arg only apply to stdio servers"),
        (["s", "--url", "ftp://h/mcp"], "--url must be an http:// or https:// URL"),
        (["s", "--command", "x", "--env", "NOVALUE"], "--env expects KEY=VALUE, got 'NOVALUE'"),
        (["s", "--command", "x", "--timeout-ms", "0"], "--timeout-ms must be a positive number"),
    ],
)
def test_add_rejects_user_mistakes_with_one_line(
    capsys: pytest.CaptureFixture[str], isolated_state: Path, argv: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "add", *argv, "--no-probe")
    assert (code, out) == (1, "")
    assert err.startswith(f"nodmix: error: {message}")
    assert err.count("\n") == 1
    assert not (isolated_state / "nodmix.json").exists()


def test_add_refuses_to_overwrite_without_replace(capsys: pytest.CaptureFixture[str]) -> None:
    _add_everything(capsys)
    code, _, err = _run(capsys, "add", "every", "--command", "other", "--no-probe")
    assert code == 1
    assert err == "nodmix: error: MCP server 'every' already exists (use --replace)\n"
    code, _, _ = _run(capsys, "add", "every", "--command", "/bin/other", "--no-probe", "--replace")
    assert code == 0


def test_list_and_show_describe_servers_and_mask_secrets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _add_everything(
        capsys, "--env", "API_KEY=sk-live-123", "--env", "TOKEN=${TOKEN}", "--env", "TZ=UTC"
    )
    code, out, _ = _run(capsys, "list")
    assert code == 0
    assert out.split() == ["every", "stdio", "enabled", everything_bin(), "stdio"]
    code, out, _ = _run(capsys, "show", "every", "--json")
    shown = json.loads(out)
    assert shown["transport"] == "stdio"
    assert shown["config"]["env"] == {"API_KEY": "********", "TOKEN": "${TOKEN}", "TZ": "UTC"}
    assert "sk-live-123" not in out


def test_remove_deletes_the_server_and_unknown_names_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], isolated_state: Path
) -> None:
    _add_everything(capsys)
    code, out, _ = _run(capsys, "remove", "every")
    assert code == 0 and out.startswith("removed MCP server 'every'")
    assert _config(isolated_state) == {"mcp": {"servers": {}}}
    code, _, err = _run(capsys, "remove", "every")
    assert (code, err) == (
        1,
        "nodmix: error: no MCP server named 'every' (configured: none configured)\n",
    )


@pytest.mark.integration
def test_probe_reports_each_server_and_fails_when_one_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _add_everything(capsys)
    code, _, _ = _run(capsys, "add", "ghost", "--command", "nodmix-no-such-server", "--no-probe")
    assert code == 0
    code, out, _ = _run(capsys, "probe", "--json")
    assert code == 1
    by_name = {r["name"]: r for r in json.loads(out)}
    assert by_name["every"]["ok"] is True
    assert by_name["every"]["tools"] == 13
    assert by_name["every"]["server"]["name"] == "mcp-servers/everything"
    assert by_name["ghost"] == {
        "name": "ghost",
        "ok": False,
        "seconds": by_name["ghost"]["seconds"],
        "error": "MCP server 'ghost' failed to start: "
        "command not found on PATH: nodmix-no-such-server",
    }
    code, out, _ = _run(capsys, "probe", "every")
    assert code == 0
    assert out.split()[:2] == ["every", "ok"]
    assert "13 tools  mcp-servers/everything" in out


@pytest.mark.integration
def test_tools_lists_direct_mode_names_and_marks_excluded_ones(
    capsys: pytest.CaptureFixture[str], isolated_state: Path
) -> None:
    _add_everything(capsys)
    doc = _config(isolated_state)
    doc["mcp"]["servers"]["every"]["tools"] = {"exclude": ["get-env"]}
    (isolated_state / "nodmix.json").write_text(json.dumps(doc), encoding="utf-8")
    code, out, _ = _run(capsys, "tools", "every")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines["every__echo"].endswith("Echoes back the input string")
    assert lines["every__get-env"].endswith("(excluded by config)")
    code, out, _ = _run(capsys, "tools", "every", "--json")
    tools = {t["name"]: t for t in json.loads(out)}
    assert tools["every__get-sum"]["tool"] == "get-sum"
    assert tools["every__get-sum"]["inputSchema"]["required"] == ["a", "b"]
    assert tools["every__get-env"]["enabled"] is False


@pytest.mark.integration
def test_tools_of_a_server_that_cannot_start_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = "import sys; sys.exit('config file missing')"
    code, _, _ = _run(
        capsys,
        "add",
        "dies",
        "--command",
        sys.executable,
        "--arg=-c",
        f"--arg={script}",
        "--no-probe",
    )
    assert code == 0
    code, out, err = _run(capsys, "tools", "dies")
    assert (code, out) == (1, "")
    assert err == (
        "nodmix: error: MCP server 'dies' failed to start: the server closed the connection "
        "(stderr: config file missing)\n"
    )


def test_listing_and_showing_servers_does_not_import_the_mcp_sdk(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mcp list` and `mcp show` only print config: the SDK (and pydantic) take seconds to
    import on a loaded machine and are not needed for that."""
    import subprocess

    _add_everything(capsys)
    program = (
        "import sys; from nodmix.cli.main import main; code = main(sys.argv[1:]); "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'pydantic')); "
        "print('LOADED', loaded); raise SystemExit(code)"
    )
    for action in (["list"], ["show", "every"]):
        done = subprocess.run(
            [sys.executable, "-c", program, "mcp", *action],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "every" in done.stdout
        assert "LOADED []" in done.stdout
