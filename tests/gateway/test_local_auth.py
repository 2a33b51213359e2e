"""No open local gateway: `nodmix gateway` without a configured token makes its own, asks it on
every endpoint and the WebSocket, and every command on the machine finds it (and the gateway,
on whatever port) through the state dir, without configuration."""

from __future__ import annotations

import http.server
import json
import os
import pty
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from nodmix.gateway.auth import WS_PROTOCOL, encode_subprotocol_token
from nodmix.gateway.server import STOP_HINT
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import GatewayProcess, run_nodmix, write_config

ENDPOINTS = [
    ("GET", "/v1/models"),
    ("GET", "/v1/models/nodmix"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
    ("POST", "/tools/invoke"),
    ("GET", "/metrics"),
    ("POST", "/hooks/mail"),
    ("GET", "/hooks/runs/run_000000000000"),
    ("POST", "/media/upload"),
    ("GET", "/media/file"),
    ("GET", "/nonexistent"),
]
TURN = {"model": "nodmix", "messages": [{"role": "user", "content": "x"}]}
INVOKE = {"tool": "read", "args": {"path": "MEMORY.md"}}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _body(path: str) -> object:
    return INVOKE if path == "/tools/invoke" else TURN


async def _ws_status(url: str, protocols: list[str], headers: dict[str, str]) -> int:
    try:
        async with connect(
            url.replace("http", "ws") + "/ws",
            subprotocols=[Subprotocol(p) for p in protocols],
            additional_headers=headers,
            proxy=None,
            open_timeout=10,
        ) as ws:
            await ws.send(
                json.dumps(
                    {
                        "type": "req",
                        "id": "1",
                        "method": "pairing.approve",
                        "params": {"channel": "telegram", "code": "AAAAAAAA"},
                    }
                )
            )
            await ws.recv()
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def test_a_gateway_without_a_configured_token_makes_one_and_asks_it_everywhere(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    (configured / "workspace").mkdir()
    (configured / "workspace" / "MEMORY.md").write_text("- secret canary\n", encoding="utf-8")
    with GatewayProcess(configured) as gateway:
        token_file = configured / "gateway" / "token"
        token = token_file.read_text(encoding="ascii").strip()
        assert gateway.token == token and len(token) >= 43
        refused: dict[str, list[int]] = {}
        for method, path in ENDPOINTS:
            codes = []
            for headers in (
                {},
                {"authorization": f"Bearer {token[:-1]}x"},  # one character off
                {"authorization": f"Bearer {token}x"},  # one character more
                {"authorization": "Bearer"},
                {"authorization": f"Basic {token}"},
                {"x-api-key": token},
                {"cookie": f"token={token}"},
            ):
                response = httpx2.request(
                    method, f"{gateway.url}{path}?token={token}", headers=headers, json=_body(path)
                )
                codes.append(response.status_code)
                assert "canary" not in response.text
            refused[path] = codes
        ok = httpx2.post(f"{gateway.url}/v1/chat/completions", headers=gateway.headers, json=TURN)
        lower = httpx2.get(f"{gateway.url}/v1/models", headers={"authorization": f"bearer {token}"})
        health = httpx2.get(f"{gateway.url}/health")
        page = httpx2.get(f"{gateway.url}/")
        ws = {
            "none": anyio.run(_ws_status, gateway.url, [WS_PROTOCOL], {}),
            "wrong": anyio.run(
                _ws_status, gateway.url, [WS_PROTOCOL, encode_subprotocol_token("x" * 43)], {}
            ),
            "subprotocol": anyio.run(
                _ws_status, gateway.url, [WS_PROTOCOL, encode_subprotocol_token(token)], {}
            ),
            "header": anyio.run(
                _ws_status, gateway.url, [WS_PROTOCOL], {"authorization": f"Bearer {token}"}
            ),
        }
        record = configured / "gateway.json"
        modes = [stat.S_IMODE(p.stat().st_mode) for p in (token_file, record)]
        _, stderr = gateway.stop()
    assert {path: set(codes) for path, codes in refused.items()} == {
        path: {401} for _, path in ENDPOINTS
    }
    assert ok.status_code == 200 and lower.status_code == 200
    assert health.status_code == 200 and health.json()["auth"] == "token"
    assert token not in health.text and token not in page.text
    assert page.status_code == 200  # the page itself, which then asks for the token
    assert ws == {"none": 401, "wrong": 401, "subprotocol": 101, "header": 101}
    assert modes == [0o600, 0o600]
    assert token not in stderr  # never logged


def test_the_token_survives_restarts_and_the_cli_finds_gateway_and_token_on_any_port(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    # A state dir whose gateway ran without a token before: nothing in the config changes.
    port = _free_port()
    config = (configured / "nodmix.json").read_text(encoding="utf-8")
    tokens = []
    for _ in range(2):
        with GatewayProcess(configured, "--port", str(port)) as gateway:
            tokens.append(gateway.token)
            status = json.loads(run_nodmix(configured, "status", "--json").stdout)
            turn = run_nodmix(configured, "agent", "-m", "hello there", "--json")
            chat = run_nodmix(configured, "agent", "--chat", stdin="/status\n/exit\n")
            url = run_nodmix(configured, "gateway", "url")
            changed = run_nodmix(
                configured, "config", "set", "agents.defaults.timeoutSeconds", "60"
            )
            gateway.stop()
    assert tokens[0] == tokens[1] and tokens[0]
    assert gateway.url == f"http://127.0.0.1:{port}"
    assert status["gateway"]["running"] is True and status["gateway"]["url"] == gateway.url
    assert turn.returncode == 0, turn.stderr
    assert json.loads(turn.stdout)["reply"] == "hello there"
    assert "no gateway" not in turn.stderr and "running in this process" not in turn.stderr
    assert f"via the gateway at {gateway.url}" in chat.stdout, chat.stdout + chat.stderr
    assert url.stdout.strip() == f"{gateway.url}/#token={tokens[0]}"
    assert f"the gateway running at {gateway.url} applies this" in changed.stdout
    assert "timeoutSeconds" not in config  # only the change above touched the config


def test_commands_never_claim_a_gateway_that_serves_another_state_dir(
    configured: Path, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    port = _free_port()
    other = tmp_path / "other-state"
    other.mkdir()
    write_config(other, model_server.base_url, f"gateway: {{ port: {port} }}")
    with GatewayProcess(other, "--port", str(port)):  # another state dir's gateway
        write_config(configured, model_server.base_url, f"gateway: {{ port: {port} }}")
        changed = run_nodmix(configured, "config", "set", "agents.defaults.timeoutSeconds", "60")
        status = json.loads(run_nodmix(configured, "status", "--json").stdout)
        turn = run_nodmix(configured, "agent", "-m", "hi")
    url = f"http://127.0.0.1:{port}"
    assert "applies this" not in changed.stdout and "needs a restart" not in changed.stdout
    assert f"the gateway answering at {url} serves another state dir" in changed.stdout
    assert status["gateway"]["running"] is False
    assert "does not serve" in status["gateway"]["detail"]
    assert turn.returncode == 0 and turn.stdout == "hi\n"  # in this process, and said so
    assert f"the gateway answering at {url} does not serve {configured}" in turn.stderr


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_a_token_file_others_can_read_is_made_private_again(
    configured: Path, model_server: ScriptedModelServer, mode: int
) -> None:
    token_file = configured / "gateway" / "token"
    token_file.parent.mkdir(mode=0o700)
    token_file.write_text("a-token-the-user-wrote-000000000000000000000\n", encoding="ascii")
    token_file.chmod(mode)
    with GatewayProcess(configured) as gateway:
        assert gateway.token == "a-token-the-user-wrote-000000000000000000000"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


def test_the_banner_on_a_terminal_prints_the_page_link_with_the_token(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    controller, terminal = pty.openpty()
    env = {**os.environ, "NODMIX_STATE_DIR": str(configured)}
    env["NODMIX_CONFIG_PATH"] = str(configured / "nodmix.json")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodmix", "gateway", "--port", "0"],
        stdout=terminal,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(terminal)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while STOP_HINT.encode() not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.5)
            if ready:
                seen += os.read(controller, 4096)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        os.close(controller)
    token = (configured / "gateway" / "token").read_text(encoding="ascii").strip()
    text = seen.decode()
    assert f"/#token={token}" in text, text


class _Squatter(http.server.BaseHTTPRequestHandler):
    """A server another local user runs on a port the CLI may try: it records what it gets."""

    seen: list[str] = []

    def do_GET(self) -> None:
        _Squatter.seen.append(f"{self.path} {self.headers.get('authorization')}")
        body = b'{"status": "ok", "auth": "token", "instance": "squatter"}'
        self.send_response(200 if self.path == "/health" else 400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_the_state_dirs_own_token_never_goes_to_another_server(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    with GatewayProcess(configured) as gateway:  # makes the token, then stops
        token = gateway.token
    assert token
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Squatter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    squatter = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        write_config(
            configured, model_server.base_url, f"gateway: {{ port: {server.server_address[1]} }}"
        )
        on_port = run_nodmix(configured, "agent", "-m", "hi")  # squatting the configured port
        named = run_nodmix(configured, "agent", "-m", "hi", "--url", squatter)
        link = run_nodmix(configured, "gateway", "url")
        linked = run_nodmix(configured, "gateway", "url", "--url", squatter)
    finally:
        server.shutdown()
        server.server_close()
    assert on_port.returncode == 0 and on_port.stdout == "hi\n"  # ran here instead
    assert named.returncode == 1  # the squatter is no gateway
    assert not any(token in line for line in _Squatter.seen), _Squatter.seen
    assert token not in link.stdout and link.returncode == 1
    assert token not in linked.stdout
