"""Who may talk to the gateway: tokens on HTTP and WebSocket, origin and host checks."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio
import httpx2
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from nodmix.gateway.auth import encode_subprotocol_token, subprotocol_token, tokens_match
from tests.gateway.support import TOKEN, asgi_client, socket_gateway

pytestmark = pytest.mark.anyio


async def test_health_and_the_web_page_need_no_token(configured: Path) -> None:
    async with asgi_client() as client:
        client.headers.pop("authorization")
        health = await client.get("/health")
        page = await client.get("/")
        script = await client.get("/static/app.js")
    body = health.json()
    assert health.status_code == 200 and body["status"] == "ok" and body["auth"] == "token"
    assert body["version"] and body["uptimeSeconds"] >= 0
    assert TOKEN not in health.text
    assert page.status_code == 200 and "<title>Nodmix</title>" in page.text
    assert script.status_code == 200 and "WebSocket" in script.text
    assert script.headers["cache-control"] == "no-cache" and script.headers["etag"]


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", "Basic dGVzdA==", "Bearer"])
async def test_api_requests_without_the_right_token_get_401(
    configured: Path, header: str | None
) -> None:
    async with asgi_client() as client:
        client.headers.pop("authorization")
        headers = {"authorization": header} if header else {}
        models = await client.get("/v1/models", headers=headers)
        chat = await client.post("/v1/chat/completions", json={}, headers=headers)
        tools = await client.post("/tools/invoke", json={}, headers=headers)
    for response in (models, chat, tools):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["type"] == "authentication_error"


async def test_cross_origin_browser_requests_are_refused_even_with_the_token(
    configured: Path,
) -> None:
    async with asgi_client() as client:
        evil = await client.post(
            "/v1/chat/completions", json={}, headers={"origin": "https://evil.example"}
        )
        same = await client.get("/v1/models", headers={"origin": "http://127.0.0.1:18789"})
    assert evil.status_code == 403 and evil.json()["error"]["code"] == "cross_origin"
    assert same.status_code == 200


async def test_without_a_token_only_loopback_host_names_are_answered(configured: Path) -> None:
    async with asgi_client(token=None) as client:
        local = await client.get("/v1/models")
        rebound = await client.get("/v1/models", headers={"host": "attacker.example:18789"})
        ipv6 = await client.get("/v1/models", headers={"host": "[::1]:18789"})
    assert local.status_code == 200 and ipv6.status_code == 200
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "bad_host"


def test_subprotocol_tokens_round_trip_and_compare_in_constant_time() -> None:
    token = "tøken/with+odd=chars"
    protocol = encode_subprotocol_token(token)
    assert protocol.startswith("nodmix.bearer.") and "=" not in protocol and "/" not in protocol
    assert subprotocol_token(["nodmix.v1", protocol]) == token
    assert subprotocol_token(["nodmix.bearer.%%%"]) is None
    assert tokens_match(token, token) and not tokens_match(None, token)
    assert not tokens_match("x", token)


async def test_websocket_accepts_a_bearer_header_or_a_subprotocol_token_and_refuses_others(
    configured: Path,
) -> None:
    with socket_gateway() as gateway:
        url = gateway.url.replace("http", "ws") + "/ws"
        async with connect(
            url, additional_headers={"authorization": f"Bearer {TOKEN}"}, proxy=None
        ) as ws:
            await ws.send('{"type":"req","id":1,"method":"health"}')
            assert '"ok":true' in str(await ws.recv())
        offered = [Subprotocol("nodmix.v1"), Subprotocol(encode_subprotocol_token(TOKEN))]
        async with connect(url, subprotocols=offered, proxy=None) as ws:
            assert ws.subprotocol == "nodmix.v1"  # the token is never echoed back
        for attempt in ({}, {"additional_headers": {"authorization": "Bearer nope"}}):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(url, proxy=None, **attempt):  # type: ignore[arg-type]
                    pass
            assert refused.value.response.status_code == 401
        wrong = base64.urlsafe_b64encode(b"nope").decode().rstrip("=")
        with pytest.raises(InvalidStatus):
            async with connect(
                url, subprotocols=[Subprotocol(f"nodmix.bearer.{wrong}")], proxy=None
            ):
                pass
        with anyio.fail_after(5), pytest.raises(InvalidStatus) as cross:
            async with connect(
                url,
                additional_headers={"authorization": f"Bearer {TOKEN}"},
                origin="https://evil.example",  # type: ignore[arg-type]
                proxy=None,
            ):
                pass
        assert cross.value.response.status_code == 403


@pytest.mark.parametrize("token", [None, "gateway-token"])
async def test_a_channel_webhook_path_needs_neither_token_nor_loopback_host(
    token: str | None,
) -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    from nodmix.gateway.auth import GuardMiddleware

    async def ok(request: Request) -> Response:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/tg/hook", ok, methods=["POST"]), Route("/{rest:path}", ok)])
    guarded = GuardMiddleware(app, token=token, channel_paths=frozenset({"/tg/hook"}))
    transport = httpx2.ASGITransport(app=guarded)
    async with httpx2.AsyncClient(transport=transport, base_url="http://bot.example.org") as client:
        hook = await client.post("/tg/hook")
        below = await client.post("/tg/hook/more")
        read = await client.get("/tg/hook")
        models = await client.get("/v1/models")
        evil = await client.post("/tg/hook", headers={"origin": "https://evil.example"})
    assert hook.status_code == 200
    refused = 403 if token is None else 401  # the public Host, or no token
    assert below.status_code == refused and models.status_code == refused
    assert read.status_code == refused  # only a POST is a platform's update
    assert evil.status_code == 403
