"""`/v1/models` lists agents and configured models; every error is in OpenAI's shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import asgi_client, write_config

pytestmark = pytest.mark.anyio

SECOND_PROVIDER = (
    "other: { api: 'openai-completions', baseUrl: '%s', apiKey: 'k', "
    "models: [{ id: 'big' }, { id: 'small' }] }"
)


async def test_models_lists_agents_with_their_model_then_configured_models(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(
        isolated_state,
        model_server.base_url,
        agents="list: [{ id: 'main' }, { id: 'coder', model: 'other/big' }]",
        providers=SECOND_PROVIDER % model_server.base_url,
    )
    async with asgi_client() as client:
        listed = (await client.get("/v1/models")).json()
        one = await client.get("/v1/models/other/small")
        agent = await client.get("/v1/models/nodmix/coder")
    assert listed["object"] == "list"
    data = {m["id"]: m for m in listed["data"]}
    assert list(data) == [
        "nodmix",
        "nodmix/main",
        "nodmix/coder",
        "local/scripted",
        "other/big",
        "other/small",
    ]
    assert data["nodmix/coder"]["nodmix"] == {
        "kind": "agent",
        "agentId": "coder",
        "model": "other/big",
    }
    assert data["other/small"]["owned_by"] == "other"
    assert data["other/small"]["nodmix"] == {"kind": "model"}
    assert all(m["object"] == "model" and isinstance(m["created"], int) for m in data.values())
    assert one.status_code == 200 and one.json()["id"] == "other/small"
    assert agent.json()["nodmix"]["agentId"] == "coder"


async def test_a_configured_model_runs_the_default_agent_with_that_model(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(
        isolated_state,
        model_server.base_url,
        providers=SECOND_PROVIDER % model_server.base_url,
    )
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions",
            json={"model": "other/small", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert response.status_code == 200
    assert response.headers["x-nodmix-session-key"].startswith("agent:main:")
    assert model_server.requests[-1].body["model"] == "small"


async def test_unknown_model_is_a_404_model_not_found(configured: Path) -> None:
    async with asgi_client() as client:
        retrieved = await client.get("/v1/models/gpt-4o")
        created = await client.post("/v1/responses", json={"model": "other/none", "input": "x"})
    for response in (retrieved, created):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/nothing-here", 404, "not_found"),
        ("GET", "/v1/chat/completions", 405, "method_not_allowed"),
        ("DELETE", "/v1/responses", 405, "method_not_allowed"),
        ("POST", "/v1/models", 405, "method_not_allowed"),
    ],
)
async def test_unknown_paths_and_methods_answer_in_openais_error_shape(
    configured: Path, method: str, path: str, status: int, code: str
) -> None:
    async with asgi_client() as client:
        response = await client.request(method, path)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error"
    assert error["message"] and "param" in error


async def test_a_field_of_the_wrong_type_is_a_400_naming_the_field(configured: Path) -> None:
    async with asgi_client() as client:
        response = await client.post("/v1/responses", json={"model": "nodmix", "input": 5})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "input" and error["type"] == "invalid_request_error"


async def test_a_gateway_misconfiguration_is_a_500_in_openais_shape(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    # A context-engine slot naming an engine nobody registered fails every turn inside the
    # runtime: the client gets a 500 that names the config problem, in OpenAI's shape.
    write_config(
        isolated_state, model_server.base_url, "plugins: { slots: { contextEngine: 'ghost' } }"
    )
    async with asgi_client() as client:
        response = await client.post("/v1/responses", json={"model": "nodmix", "input": "x"})
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "api_error" and "ghost" in error["message"]
