"""The interactive chat and message input of `nodmix agent`, as a user drives them: real CLI
subprocesses against the scripted model server, in process and through a real gateway."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

from ..gateway.support import GatewayProcess, wait_until


def respond(request: ModelRequest) -> ModelReply | ModelError:
    text = getattr(request.messages[-1], "text", "")
    if "fail" in text:
        return ModelError(400, "scripted refusal")
    return ModelReply.text(f"echo: {text}")


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(respond) as running:
        yield running


@pytest.fixture
def configured(isolated_state: Path, server: ScriptedModelServer) -> Path:
    provider = (
        f"local: {{ api: 'openai-completions', baseUrl: '{server.base_url}', apiKey: 'test', "
        "models: [{ id: 'scripted', contextWindow: 32000 }, { id: 'other' }] }"
    )
    (isolated_state / "nodmix.json").write_text(
        f"{{ models: {{ providers: {{ {provider} }} }}, "
        "agents: { defaults: { model: { primary: 'local/scripted' } } } }",
        encoding="utf-8",
    )
    return isolated_state


def user_texts(server: ScriptedModelServer) -> list[str]:
    return [
        getattr(r.request.messages[-1], "text", "")
        for r in server.requests
        if r.request is not None
    ]


CHAT = "hello\nplease fail\nagain\n/foo bar\n/status\n/model nope/x\n/model local/other\nlast\n"


def check_chat(done: subprocess.CompletedProcess[str], server: ScriptedModelServer) -> None:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    out, err = done.stdout, done.stderr
    # the failed turn is one line, and the chat goes on to answer the next message
    assert "nodmix: error: local: 400 bad request: scripted refusal" in err
    assert out.index("echo: hello") < out.index("echo: again") < out.index("echo: last")
    # an unknown command is a hint and never reaches the model
    assert "unknown command /foo — /help lists commands" in err
    assert "/foo bar" not in user_texts(server)
    # /status
    assert "agent:       main\n" in out
    assert "model:       local/scripted" in out
    assert "session:     agent:main:main (id " in out
    assert " of 32,000 tokens" in out
    assert "compactions: 0" in out and "code mode:   off" in out
    # /model: an unknown ref is refused, a known one is used for the next turn
    assert "unknown provider 'nope'" in err
    assert "model for this chat: local/other" in out
    last = server.requests[-1].body
    assert last["model"] == "other" and user_texts(server)[-1] == "last"
    assert user_texts(server) == ["hello", "please fail", "again", "last"]


def test_in_process_chat_survives_a_failed_turn_and_handles_its_commands(
    configured: Path, server: ScriptedModelServer
) -> None:
    check_chat(run_nodmix(configured, "agent", "--local", "--chat", stdin=CHAT), server)


def test_chat_through_a_gateway_survives_a_failed_turn_and_handles_its_commands(
    configured: Path, server: ScriptedModelServer
) -> None:
    with GatewayProcess(configured) as gateway:
        done = run_nodmix(configured, "agent", "--chat", "--url", gateway.url, stdin=CHAT)
    check_chat(done, server)
    assert "via the gateway at " + gateway.url in done.stdout


def test_piped_stdin_is_one_message_and_only_the_reply_is_on_stdout(
    configured: Path, server: ScriptedModelServer
) -> None:
    done = run_nodmix(configured, "agent", "--local", stdin="first line\nsecond line\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: first line\nsecond line\n"
    assert user_texts(server) == ["first line\nsecond line"]


def test_dash_m_dash_reads_the_message_from_stdin(
    configured: Path, server: ScriptedModelServer
) -> None:
    done = run_nodmix(configured, "agent", "--local", "-m", "-", stdin="from stdin")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: from stdin\n"


@pytest.mark.parametrize(
    ("args", "stdin", "source"),
    [
        (("-m", ""), "", "-m"),
        (("-m", "   "), "", "-m"),
        ((), " \n\t\n", "stdin"),
        (("-m", "-"), "", "stdin"),
    ],
)
def test_an_empty_message_is_refused_and_never_sent(
    configured: Path, server: ScriptedModelServer, args: tuple[str, ...], stdin: str, source: str
) -> None:
    done = run_nodmix(configured, "agent", "--local", *args, stdin=stdin)
    assert done.returncode == 1
    assert done.stderr == f"nodmix: error: the message from {source} is empty; nothing was sent\n"
    assert done.stdout == "" and server.requests == []


def test_chat_and_message_together_are_refused(configured: Path) -> None:
    done = run_nodmix(configured, "agent", "--local", "--chat", "-m", "hi")
    assert done.returncode == 2 and "--chat and -m" in done.stderr


@pytest.mark.anyio
async def test_terminal_prompt_edits_lines_keeps_history_and_quits_on_ctrl_d(
    configured: Path, server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from nodmix.cli.agent import LocalChat
    from nodmix.cli.chat import history_path, prompt_lines, run_chat
    from nodmix.cli.printer import EventPrinter
    from nodmix.runtime import Runtime

    args = argparse.Namespace(agent_id=None, session_key=None, model=None, no_tools=False)
    history = history_path()
    assert history.parent == configured
    with create_pipe_input() as pipe:
        # "helo", cursor left, insert "l": line editing; then a failed turn, then Ctrl-D.
        pipe.send_text("helo\x1b[Dl\rplease fail\r/status\r\x04")
        session: PromptSession[str] = PromptSession(
            input=pipe, output=DummyOutput(), history=FileHistory(str(history))
        )
        async with Runtime.open() as runtime:
            code = await run_chat(
                LocalChat(runtime, args),
                prompt_lines(session),
                make_printer=lambda: EventPrinter(stream_text=True),
            )
    assert code == 0
    out, err = capsys.readouterr()
    assert "echo: hello" in out and "code mode:   off" in out
    assert "nodmix: error: local: 400 bad request: scripted refusal" in err
    assert user_texts(server) == ["hello", "please fail"]
    saved = history.read_text(encoding="utf-8")
    assert "+hello" in saved and "+please fail" in saved and "+/status" in saved


def test_the_chat_history_is_readable_by_the_user_only(configured: Path) -> None:
    from nodmix.cli.chat import history_path, private_history

    fresh = private_history()
    assert fresh == history_path() and fresh.stat().st_mode & 0o777 == 0o600
    fresh.write_text("\n# earlier\n+my api key is sk-123\n", encoding="utf-8")
    fresh.chmod(0o644)  # a file written by an earlier version
    assert private_history().stat().st_mode & 0o777 == 0o600
    assert "+my api key is sk-123" in fresh.read_text(encoding="utf-8")


def test_config_set_model_reaches_the_running_gateway_and_port_or_channels_ask_for_a_restart(
    configured: Path, server: ScriptedModelServer
) -> None:
    with GatewayProcess(configured) as gateway:
        port = gateway.url.rsplit(":", 1)[1]
        assert run_nodmix(configured, "config", "set", "gateway.port", port).returncode == 0
        url = ("--url", gateway.url)
        first = run_nodmix(configured, "agent", "-m", "one", "--json", *url)
        assert first.returncode == 0, first.stderr
        changed = run_nodmix(
            configured, "config", "set", "agents.defaults.model.primary", "local/other"
        )
        assert changed.returncode == 0, changed.stderr
        assert f"the gateway running at {gateway.url} applies this" in changed.stdout
        models: list[str] = []

        def uses_the_new_model() -> bool:
            done = run_nodmix(configured, "agent", "-m", "two", "--json", *url)
            models.append(json.loads(done.stdout)["model"])
            return models[-1] == "local/other"

        wait_until(uses_the_new_model, what="the gateway to apply the new model")
        # Channels start with the gateway: a new section waits for a restart too.
        channel = run_nodmix(configured, "config", "set", "channels.telegram", "{enabled: false}")
        assert "needs a restart to apply channels.telegram" in channel.stdout, channel.stdout
        removed = run_nodmix(configured, "config", "unset", "channels.telegram")
        assert "needs a restart to apply channels.telegram" in removed.stdout, removed.stdout
        moved = run_nodmix(configured, "config", "set", "gateway.port", "1")
        assert f"the gateway running at {gateway.url} needs a restart" in moved.stdout
    assert json.loads(first.stdout)["model"] == "local/scripted"
    assert server.requests[-1].body["model"] == "other"
