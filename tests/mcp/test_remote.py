"""Remote servers: server-everything over streamable HTTP and SSE, as local subprocesses."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest
from mcp_support import HTTPServer, everything_stdio, free_port

from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_streamable_http_server_offers_tools_resources_and_prompts(
    streamable_http_server: HTTPServer,
) -> None:
    config = MCPServerConfig(url=f"{streamable_http_server.base}/mcp", headers={"X-Client": "t"})
    async with MCPManager({"web": config}) as manager:
        tools = {t.spec.name for t in await manager.list_tools()}
        assert {"web__echo", "web__get-sum"} <= tools
        echo = await manager.call_tool("web", "echo", {"message": "over http"})
        total = await manager.call_tool("web", "get-sum", {"a": 1.5, "b": 2})
        resources = await manager.list_resources("web")
        read = await manager.read_resource("web", "demo://resource/dynamic/text/3")
        prompt = await manager.get_prompt("web", "simple-prompt")
        (status,) = manager.status()
    assert echo.text_content == "Echo: over http"
    assert total.text_content == "The sum of 1.5 and 2 is 3.5."
    assert any(r["uri"].endswith("architecture.md") for r in resources)
    assert read["contents"][0]["text"].startswith("Resource 3:")
    assert prompt["messages"][0]["content"]["text"] == "This is a simple prompt without arguments."
    assert (status.transport, status.starts) == ("streamable-http", 1)


async def test_sse_server_tools_work(sse_server: HTTPServer) -> None:
    config = MCPServerConfig(url=f"{sse_server.base}/sse", transport="sse")
    async with MCPManager({"legacy": config}) as manager:
        echo = await manager.call_tool("legacy", "echo", {"message": "over sse"})
        (status,) = manager.status()
    assert echo.text_content == "Echo: over sse"
    assert status.transport == "sse"


async def test_unreachable_url_fails_alone_and_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    servers = {"gone": MCPServerConfig(url=url), "local": everything_stdio()}
    async with MCPManager(servers) as manager:
        tools = await manager.list_tools()
    assert {t.origin.owner for t in tools} == {"local"}
    assert manager.failures["gone"].startswith(
        f"MCP server 'gone' failed to start: cannot connect to {url}"
    )


async def test_wrong_http_path_is_a_start_failure(streamable_http_server: HTTPServer) -> None:
    config = MCPServerConfig(url=f"{streamable_http_server.base}/not-mcp")
    async with MCPManager({"web": config}) as manager:
        result = await manager.call_tool("web", "echo", {"message": "x"})
    assert result.is_error is True
    assert result.text_content == (
        "MCP server 'web' failed to start: "
        "HTTP 404 Not Found (is the URL the server's MCP endpoint?)"
    )


async def test_restarted_http_server_is_reconnected_transparently() -> None:
    server = HTTPServer("streamableHttp").start()
    try:
        config = MCPServerConfig(url=f"{server.base}/mcp")
        async with MCPManager({"web": config}, retry_backoff=0.0) as manager:
            first = await manager.call_tool("web", "echo", {"message": "one"})
            server.stop()
            down = await manager.call_tool("web", "echo", {"message": "two"})
            server.start()
            back = await manager.call_tool("web", "echo", {"message": "three"})
            (status,) = manager.status()
    finally:
        server.stop()
    assert first.text_content == "Echo: one"
    assert down.is_error is True
    assert "cannot connect" in down.text_content
    assert back.text_content == "Echo: three"
    assert status.starts == 3


async def test_http_server_restarted_between_calls_is_used_again_from_the_next_call() -> None:
    # server-everything answers an unknown session id with HTTP 400 rather than the 404 the spec
    # asks for, so the first call after its restart fails; the one after that reconnects.
    server = HTTPServer("streamableHttp").start()
    try:
        config = MCPServerConfig(url=f"{server.base}/mcp")
        async with MCPManager({"web": config}) as manager:
            first = await manager.call_tool("web", "echo", {"message": "one"})
            server.stop()
            server.start()  # same port, but the new process does not know the old session
            second = await manager.call_tool("web", "echo", {"message": "two"})
            third = await manager.call_tool("web", "echo", {"message": "three"})
            (status,) = manager.status()
    finally:
        server.stop()
    assert first.text_content == "Echo: one"
    assert second.is_error is True
    assert "next request starts a new session" in second.text_content
    assert third.text_content == "Echo: three"
    assert status.starts == 2


async def test_configured_headers_are_sent_with_env_references_resolved() -> None:
    # A bare TCP listener records the first request and answers 404: enough to see the headers.
    seen: list[bytes] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def answer(stream: anyio.abc.SocketStream) -> None:
        data = b""
        async with stream:
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            seen.append(data)
            await stream.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    config = MCPServerConfig(
        url=f"http://127.0.0.1:{port}/mcp",
        headers={"Authorization": "${NODMIX_TEST_TOKEN}", "X-Team": "infra"},
    )
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        env = {"NODMIX_TEST_TOKEN": "Bearer t0k3n"}
        async with MCPManager({"api": config}, env=env) as manager:
            result = await manager.call_tool("api", "anything", {})
        tg.cancel_scope.cancel()
    assert result.is_error is True
    head = seen[0].decode().lower()
    assert "authorization: bearer t0k3n\r\n" in head
    assert "x-team: infra\r\n" in head


async def test_unset_header_reference_fails_before_connecting() -> None:
    config = MCPServerConfig(url="http://127.0.0.1:9/mcp", headers={"Authorization": "${NOPE}"})
    async with MCPManager({"api": config}, env={}) as manager:
        assert await manager.list_tools() == []
    assert manager.failures["api"] == (
        "MCP server 'api' failed to start: mcp.servers.api.headers.Authorization: "
        "refers to ${NOPE}, which is not set in the environment"
    )
