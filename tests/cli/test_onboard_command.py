"""`nodmix onboard`: the wizard in a real terminal (tmux), and its non-interactive form."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from tests.cli.terminal import Terminal
from tests.gateway.support import run_nodmix

pytestmark = pytest.mark.integration


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(echo, models=("scripted", "scripted-mini")) as server:
        yield server


def _env(state: Path) -> dict[str, str]:
    return {"NODMIX_STATE_DIR": str(state), "NODMIX_CONFIG_PATH": str(state / "nodmix.json")}


def test_the_wizard_in_a_terminal_writes_a_config_that_runs_a_turn(
    isolated_state: Path, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    with Terminal(tmp_path).run(
        [sys.executable, "-m", "nodmix", "onboard"], _env(isolated_state)
    ) as term:
        term.wait_for("Provider (1-4) [1]:")
        term.type("9", "Enter")  # out of range: asked again
        term.wait_for("a number from 1 to 4")
        term.type("BSpace", "4", "Enter")
        term.wait_for("Server URL [")
        term.type(model_server.base_url, "Enter")
        term.wait_for("API key (Enter for none):")
        term.type("Enter")
        term.wait_for("Model (1-2 or a name) [1]:")
        term.type("2", "Enter")
        term.wait_for("Turn on code mode")
        term.type("n", "Enter")
        term.wait_for("Also answer chats on Telegram")
        term.type("n", "Enter")
        code = term.exit_code()
        screen = term.screen()
    assert code == 0, screen
    assert "1) scripted" in screen and "2) scripted-mini" in screen
    assert "test request: local/scripted-mini answered" in screen
    config = json.loads((isolated_state / "nodmix.json").read_text())
    assert config["agents"]["defaults"]["model"]["primary"] == "local/scripted-mini"
    assert config["models"]["providers"]["local"]["baseUrl"] == model_server.base_url
    assert config["tools"]["codeMode"] is False
    turn = run_nodmix(isolated_state, "agent", "--local", "-m", "hello from onboarding")
    assert turn.returncode == 0 and turn.stdout.strip() == "hello from onboarding"


def test_non_interactive_onboarding_picks_the_first_model_tests_it_and_keeps_other_keys(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    (isolated_state / "nodmix.json").write_text("{ gateway: { port: 18999 } }")
    done = run_nodmix(
        isolated_state,
        "onboard",
        "--non-interactive",
        "--provider",
        "local",
        "--base-url",
        model_server.base_url,
        "--code-mode",
        "on",
    )
    assert done.returncode == 0, done.stderr
    assert "test request: local/scripted answered" in done.stdout
    config = json.loads((isolated_state / "nodmix.json").read_text())
    assert config["gateway"] == {"port": 18999}
    assert config["agents"]["defaults"]["model"]["primary"] == "local/scripted"
    assert config["tools"]["codeMode"] is True
    assert (isolated_state / "nodmix.json").stat().st_mode & 0o077 == 0


def test_onboarding_refuses_a_model_that_does_not_answer_and_writes_nothing(
    isolated_state: Path,
) -> None:
    done = run_nodmix(
        isolated_state,
        "onboard",
        "--non-interactive",
        "--provider",
        "local",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "ghost",
    )
    no_terminal = run_nodmix(isolated_state, "onboard")
    bad_provider = run_nodmix(isolated_state, "onboard", "--non-interactive", "--provider", "x")
    bad_url = run_nodmix(
        isolated_state, "onboard", "--non-interactive", "--provider", "local", "--base-url", "box"
    )
    assert bad_url.returncode == 1
    assert "--base-url: expected an http:// or https:// URL, got 'box'" in bad_url.stderr
    assert done.returncode == 1 and "local/ghost did not answer" in done.stderr
    assert not (isolated_state / "nodmix.json").exists()
    assert no_terminal.returncode == 1 and "--non-interactive" in no_terminal.stderr
    assert bad_provider.returncode == 1 and "unknown provider 'x'" in bad_provider.stderr
    for run in (done, no_terminal, bad_provider, bad_url):
        assert "Traceback" not in run.stderr


def test_a_channel_is_added_with_its_defaults_where_this_build_has_channels(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    from nodmix.cli.onboarding import channels_supported

    done = run_nodmix(
        isolated_state,
        "onboard",
        "--non-interactive",
        "--provider",
        "local",
        "--base-url",
        model_server.base_url,
        "--channel",
        "telegram",
        env={"TELEGRAM_BOT_TOKEN": ""},
    )
    if not channels_supported():
        assert done.returncode == 1 and "has no chat channels" in done.stderr
        assert not (isolated_state / "nodmix.json").exists()
        return
    assert done.returncode == 0, done.stderr
    assert "set TELEGRAM_BOT_TOKEN in the gateway's environment" in done.stdout
    config = json.loads((isolated_state / "nodmix.json").read_text())
    assert config["channels"] == {"telegram": {}}


@pytest.mark.parametrize("model", [(), ("--model", "ghost")], ids=["listing", "test-request"])
def test_an_unreachable_server_is_described_in_words_not_exception_names(
    isolated_state: Path, model: tuple[str, ...]
) -> None:
    """Without a model the wizard lists the server's models first, with one it sends the test
    request: neither may print an exception's class name (ConnectError, ConnectTimeout, ...)."""
    done = run_nodmix(
        isolated_state,
        *("onboard", "--non-interactive", "--provider", "local"),
        *("--base-url", "http://127.0.0.1:9/v1", *model),
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1
    assert re.search(r"\b[A-Z][A-Za-z]*(Error|Exception|Timeout)\b", out) is None, out
    assert "connection refused" in out
