"""A message that cannot fit the model's window: a clear client error on every entry point, and
the model never sees a request."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.gateway.client import GatewayClient, GatewayError
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, asgi_client, run_nodmix, socket_gateway

pytestmark = pytest.mark.anyio

TOO_BIG = "word " * 40_000  # ~50,000 tokens; the configured model holds 32,000


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_completion_too_large_for_the_window_is_a_400_and_no_model_call(
    configured: Path, model_server: ScriptedModelServer, stream: bool
) -> None:
    body = {"model": "nodmix", "stream": stream, "messages": [{"role": "user", "content": TOO_BIG}]}
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error" and error["param"] == "messages"
    assert "local/scripted holds 32,000" in error["message"]
    assert model_server.requests == []


async def test_websocket_agent_request_too_large_for_the_window_fails_cleanly(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            with pytest.raises(GatewayError) as failed:
                await client.request("agent", {"message": TOO_BIG, "sessionKey": "ws-big"})
            answer = await client.request("agent", {"message": "hi", "sessionKey": "ws-big"})
    assert failed.value.code == "context_length_exceeded"
    assert answer["reply"]
    assert all(TOO_BIG not in str(r.body) for r in model_server.requests)


def test_cli_local_too_large_for_the_window_is_one_line(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    done = run_nodmix(configured, "agent", "--local", "-m", "word " * 26_000)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "context window" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert model_server.requests == []
