"""`nodmix gateway` and `nodmix agent` as a user runs them: real processes, real sockets."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from pathlib import Path

import anyio
import anyio.to_thread
import httpx2
import openai
import pytest

from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import GatewayProcess, run_nodmix, wait_until, workspace_file

pytestmark = pytest.mark.integration

TOKEN = "cli-token-42"


def test_openai_client_gets_plain_and_streamed_completions_and_a_wrong_token_gets_401(
    configured: Path,
) -> None:
    with GatewayProcess(configured, "--token", TOKEN) as gateway:
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TOKEN, max_retries=0)
        plain = client.chat.completions.create(
            model="nodmix", messages=[{"role": "user", "content": "plain hello"}]
        )
        stream = client.chat.completions.create(
            model="nodmix",
            messages=[{"role": "user", "content": "streamed hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        models = [m.id for m in client.models.list()]
        wrong = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as refused:
            wrong.chat.completions.create(
                model="nodmix", messages=[{"role": "user", "content": "x"}]
            )
        code, stderr = gateway.stop()
    assert plain.choices[0].message.content == "plain hello"
    assert plain.usage is not None and plain.usage.total_tokens > 0
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed hello"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert models == ["nodmix", "nodmix/main", "local/scripted"]
    assert refused.value.status_code == 401
    assert code == 0 and "Traceback" not in stderr and TOKEN not in stderr
    assert any("bearer token required" in line for line in gateway.banner)


def test_agent_command_runs_through_the_gateway_with_the_local_json_shape(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    workspace_file(configured, "notes.txt", "The ferry leaves at 9:40.")
    local = run_nodmix(configured, "agent", "--local", "-m", "read notes.txt", "--json")
    with GatewayProcess(configured, "--token", TOKEN) as gateway:
        remote = run_nodmix(
            configured,
            "agent",
            "-m",
            "read notes.txt",
            "--json",
            "--url",
            gateway.url,
            env={"NODMIX_GATEWAY_TOKEN": TOKEN, "NODMIX_AGENT_REQUIRE_GATEWAY": "1"},
        )
        streamed = run_nodmix(
            configured, "agent", "-m", "hello there", "--url", gateway.url, "--token", TOKEN
        )
        refused = run_nodmix(
            configured, "agent", "-m", "hi", "--url", gateway.url, "--token", "wrong"
        )
        bare = run_nodmix(
            configured, "agent", "--no-tools", "-m", "hi", "--url", gateway.url, "--token", TOKEN
        )
        bare_request = model_server.requests[-1].request
        gateway.stop()
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    local_out, remote_out = json.loads(local.stdout), json.loads(remote.stdout)
    assert list(remote_out) == list(local_out)
    assert remote_out["reply"] == local_out["reply"] == "The ferry leaves at 9:40."
    assert remote_out["sessionId"] == local_out["sessionId"]  # the same session, on disk
    assert [c["name"] for c in remote_out["toolCalls"]] == ["read"]
    assert streamed.returncode == 0 and streamed.stdout == "hello there\n"
    assert refused.returncode == 1
    assert bare.returncode == 0, bare.stderr
    assert bare_request.tools == []  # `--no-tools` reached the gateway as `disableTools`
    assert refused.stderr.strip().splitlines() == [
        f"nodmix: error: the gateway at {gateway.url} rejected the token: "
        "pass --token or set NODMIX_GATEWAY_TOKEN"
    ]


def test_agent_command_falls_back_to_in_process_with_a_clear_message(configured: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    done = run_nodmix(configured, "agent", "-m", "hi", "--url", f"http://127.0.0.1:{free}")
    assert done.returncode == 0 and done.stdout == "hi\n"
    assert "no gateway at" in done.stderr and "running in this process" in done.stderr


def test_with_no_config_at_all_the_gateway_starts_and_explains_how_to_pick_a_model(
    isolated_state: Path,
) -> None:
    with GatewayProcess(isolated_state) as gateway:
        health = httpx2.get(f"{gateway.url}/health", timeout=5).json()
        models = httpx2.get(f"{gateway.url}/v1/models", headers=gateway.headers, timeout=5)
        code, stderr = gateway.stop(signal.SIGINT)
    banner = "\n".join(gateway.banner)
    assert "main uses ollama/llama3.2" in banner
    assert "not found: running on built-in defaults" in banner
    assert "nodmix config set agents.defaults.model.primary openai/gpt-4.1-mini" in banner
    # No token configured: the gateway made its own; the link that carries it is printed on
    # a terminal only (`test_local_auth.py`), and `gateway url` prints it on demand.
    assert f"auth:       bearer token required (kept in {isolated_state}" in banner
    assert gateway.token and gateway.token not in banner
    assert "nodmix gateway url" in banner
    assert health["status"] == "ok" and health["auth"] == "token"
    assert models.status_code == 200
    assert code == 0 and "Traceback" not in stderr


def test_auth_mode_none_serves_without_a_token_on_loopback_only(isolated_state: Path) -> None:
    (isolated_state / "nodmix.json").write_text("{ gateway: { auth: { mode: 'none' } } }")
    with GatewayProcess(isolated_state) as gateway:
        health = httpx2.get(f"{gateway.url}/health", timeout=5).json()
        models = httpx2.get(f"{gateway.url}/v1/models", timeout=5)
        gateway.stop(signal.SIGINT)
    assert 'auth:       none (gateway.auth.mode "none"' in "\n".join(gateway.banner)
    assert gateway.token is None and health["auth"] == "none"
    assert models.status_code == 200
    assert not (isolated_state / "gateway" / "token").exists()
    lan = run_nodmix(isolated_state, "gateway", "--bind", "lan")
    assert lan.returncode == 1 and "without a token" in lan.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--bind", "lan"), "refusing to listen on 0.0.0.0 without a token"),
        (("--bind", "somewhere"), "invalid bind 'somewhere'"),
    ],
)
def test_unsafe_or_invalid_binds_fail_with_one_line(
    isolated_state: Path, args: tuple[str, ...], expected: str
) -> None:
    done = run_nodmix(isolated_state, "gateway", *args)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and lines[0].startswith("nodmix: error:")


def test_a_busy_port_fails_with_one_line(isolated_state: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        done = run_nodmix(isolated_state, "gateway", "--port", str(port))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0]


def test_debug_variables_log_model_traffic_with_secrets_redacted(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    debug = {
        "NODMIX_DEBUG_MODEL_TRANSPORT": "1",
        "NODMIX_DEBUG_MODEL_PAYLOAD": "tools",
        "NODMIX_DEBUG_SSE": "peek",
    }
    with GatewayProcess(configured, "--token", TOKEN, env=debug) as gateway:
        response = httpx2.post(
            f"{gateway.url}/v1/chat/completions",
            headers={"authorization": f"Bearer {TOKEN}"},
            json={"model": "nodmix", "messages": [{"role": "user", "content": "log me"}]},
            timeout=10,
        )
        _, stderr = gateway.stop()
    assert response.status_code == 200
    assert "nodmix.providers" in stderr
    assert "local payload tools: exec,read,write,edit,web_fetch" in stderr
    assert f"POST {model_server.base_url}/chat/completions -> 200" in stderr
    assert "sse #1" in stderr and "sse #6" not in stderr  # peek: the first five only
    assert "sk-test-secret-key" not in stderr and TOKEN not in stderr


def test_full_redacted_payload_logging_never_shows_the_api_key(configured: Path) -> None:
    debug = {"NODMIX_DEBUG_MODEL_PAYLOAD": "full-redacted", "NODMIX_DEBUG_SSE": "events"}
    with GatewayProcess(configured, env=debug) as gateway:
        httpx2.post(
            f"{gateway.url}/v1/chat/completions",
            headers=gateway.headers,
            json={
                "model": "nodmix",
                "messages": [{"role": "user", "content": "sk-abcdef0123456789"}],
            },
            timeout=10,
        )
        _, stderr = gateway.stop()
    assert "payload: {" in stderr and '"messages"' in stderr
    assert "sk-test-secret-key" not in stderr and "sk-abcdef0123456789" not in stderr
    assert "[redacted]" in stderr


def test_a_second_signal_cancels_running_turns_instead_of_waiting(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    gate, entered = threading.Event(), threading.Event()

    async def stuck(request: ModelRequest) -> ModelReply:
        entered.set()
        await anyio.to_thread.run_sync(gate.wait, abandon_on_cancel=True)
        return ModelReply.text("too late")

    model_server.respond = stuck
    answer: dict[str, object] = {}
    try:
        with GatewayProcess(configured) as gateway:

            def ask() -> None:
                try:
                    answer["status"] = httpx2.post(
                        f"{gateway.url}/v1/chat/completions",
                        headers=gateway.headers,
                        json={
                            "model": "nodmix",
                            "user": "stuck",
                            "messages": [{"role": "user", "content": "x"}],
                        },
                        timeout=30,
                    ).status_code
                except httpx2.HTTPError as exc:
                    answer["error"] = exc

            asker = threading.Thread(target=ask)
            asker.start()
            assert entered.wait(10)
            assert gateway.proc is not None
            gateway.proc.send_signal(signal.SIGINT)
            wait_until(
                lambda: "letting running turns finish" in gateway.stderr_so_far(),
                what="the graceful stop to begin",
            )
            started = time.monotonic()
            code, stderr = gateway.stop(signal.SIGINT)
            asker.join(10)
    finally:
        gate.set()
    assert time.monotonic() - started < 5  # not the 10 s grace period
    assert code == 0 and "cancelling running turns now" in stderr
    assert "Traceback" not in stderr, stderr
    assert answer == {"status": 409}  # the client learns its turn was aborted


def test_a_key_set_in_the_shell_but_not_in_the_gateway_is_explained(configured: Path) -> None:
    with GatewayProcess(configured) as gateway:  # started without OPENAI_API_KEY
        args = ("agent", "-m", "hi", "--model", "openai/gpt-4.1-mini", "--url", gateway.url)
        unset = run_nodmix(configured, *args)
        in_shell = run_nodmix(configured, *args, env={"OPENAI_API_KEY": "sk-only-here"})
    assert unset.returncode == 1 and "no API key: set OPENAI_API_KEY" in unset.stderr
    assert "not where the gateway runs" not in unset.stderr
    lines = in_shell.stderr.strip().splitlines()
    assert in_shell.returncode == 1 and len(lines) == 1, in_shell.stderr
    assert "OPENAI_API_KEY is set in this shell but not where the gateway runs" in lines[0]
    assert "restart the gateway from this shell" in lines[0]
