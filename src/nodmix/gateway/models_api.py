"""`GET /v1/models` and `GET /v1/models/{id}`: what a request's `model` may name.

- `nodmix`: the default agent (`main`);
- `nodmix/<agentId>`: every configured agent;
- `<provider>/<model>`: every model listed under `models.providers` and every model an agent
  uses (primary and fallbacks). A request naming one runs the default agent with that model.

Agents carry `"nodmix": {"kind": "agent", "agentId", "model"}`, models `"nodmix": {"kind":
"model"}`; both are extra fields OpenAI clients ignore.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from nodmix.agents import AgentProfile
from nodmix.gateway.errors import not_found
from nodmix.gateway.openai_mapping import MODEL_PREFIX, agent_of_model
from nodmix.gateway.state import Gateway, gateway_of


def _agent_model(gateway: Gateway, agent_id: str) -> str | None:
    runtime = gateway.runtime
    try:
        return runtime.model_refs(runtime.agent(agent_id))[0]
    except Exception:  # a broken model config must not break the listing; turns report it
        return None


def configured_models(gateway: Gateway) -> list[str]:
    """Model refs of `models.providers` and of every agent's chain, in config order."""
    runtime = gateway.runtime
    refs = [
        f"{provider}/{entry.id}"
        for provider, config in runtime.config.models.providers.items()
        for entry in config.models
    ]
    for agent_id in runtime.agent_ids():
        try:
            refs.extend(runtime.model_refs(runtime.agent(agent_id)))
        except Exception:
            continue
    return list(dict.fromkeys(refs))


def catalog(gateway: Gateway) -> list[dict[str, Any]]:
    """Every model entry, agents first."""
    created = int(gateway.started_at)
    main = gateway.runtime.agent(None).id
    entries: list[dict[str, Any]] = []
    for model_id, agent_id in [
        (MODEL_PREFIX, main),
        *((f"{MODEL_PREFIX}/{a}", a) for a in gateway.runtime.agent_ids()),
    ]:
        entries.append(
            {
                "id": model_id,
                "object": "model",
                "created": created,
                "owned_by": "nodmix",
                "nodmix": {
                    "kind": "agent",
                    "agentId": agent_id,
                    "model": _agent_model(gateway, agent_id),
                },
            }
        )
    entries.extend(
        {
            "id": ref,
            "object": "model",
            "created": created,
            "owned_by": ref.partition("/")[0],
            "nodmix": {"kind": "model"},
        }
        for ref in configured_models(gateway)
    )
    return entries


async def list_models(request: Request) -> Response:
    """`GET /v1/models`."""
    return JSONResponse({"object": "list", "data": catalog(gateway_of(request))})


async def retrieve_model(request: Request) -> Response:
    """`GET /v1/models/{id}` (the id may contain slashes)."""
    model_id = request.path_params["model"]
    for entry in catalog(gateway_of(request)):
        if entry["id"] == model_id:
            return JSONResponse(entry)
    raise _unknown(model_id)


def _unknown(model: str) -> Exception:
    return not_found(
        f"model {model!r} does not exist; use {MODEL_PREFIX!r}, '{MODEL_PREFIX}/<agentId>' or "
        "a configured '<provider>/<model>' (see GET /v1/models)",
        code="model_not_found",
    )


def resolve_model(gateway: Gateway, model: str) -> tuple[AgentProfile, str | None]:
    """`(agent, model override)` for a request's `model`.

    Raises:
        APIError: 404 for a name `GET /v1/models` does not list.
    """
    try:
        agent_id = agent_of_model(model)
    except ValueError:
        if model in configured_models(gateway):
            return gateway.agent(None), model
        raise _unknown(model) from None
    return gateway.agent(agent_id), None
