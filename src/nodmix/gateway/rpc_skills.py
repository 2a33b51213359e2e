"""The `skills.list` WebSocket method: every skill found for an agent and whether it is offered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from nodmix.gateway.errors import bad_request, classify

if TYPE_CHECKING:
    from nodmix.gateway.ws import Connection


async def skills_list(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """`{agentId, skills: [{name, description, source, path, eligible, reasons}], problems}`."""
    from nodmix.runtime.skills import review_agent

    agent_id = params.get("agentId")
    if agent_id is not None and not isinstance(agent_id, str):
        raise bad_request("params.agentId must be a str", param="agentId")
    runtime = conn.gateway.runtime
    try:
        agent = runtime.agent(agent_id)
        review = await anyio.to_thread.run_sync(
            review_agent, runtime.skills, runtime.loaded, agent, runtime.env
        )
    except Exception as exc:
        raise classify(exc) from None
    return {
        "agentId": agent.id,
        "skills": [status.to_json() for status in review.statuses],
        "problems": list(review.problems),
    }
