"""`POST /tools/invoke`: run one tool of an agent directly, through policy and hooks.

Request: `{"tool": "<name or catalog id>", "args": {...}, "sessionKey"?: "...",
"agentId"?: "main"}`. The tool is looked up among the agent's core, plugin and MCP tools after
`tools.allow`/`tools.deny` (a denied tool answers 403, an unknown one 404), then run by the
runtime's executor, so argument validation and `before_tool_call`/`after_tool_call` hooks apply
exactly as in a turn. The response is `{"ok": bool, "result": {...}}`; a tool that reports a
failure is still a 200 with `ok: false`, because the call itself was served.

The shell tool obeys `tools.exec` (policy, allowlist, approvals) like in a turn, with the
owner's defaults. A gateway without a token refuses it outright (403 `exec_unauthenticated`):
any local process could otherwise run commands as the gateway's user. Set
`gateway.tools.allowUnauthenticated: true` to allow it anyway.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from nodmix.agents import AgentProfile
from nodmix.gateway.approvals import owner_call, refuse_unauthenticated_exec
from nodmix.gateway.errors import APIError, not_found
from nodmix.gateway.limits import decode_json
from nodmix.gateway.state import Gateway, gateway_of
from nodmix.gateway.wire import to_json
from nodmix.runtime import Runtime
from nodmix.runtime.toolset import agent_isolation, sandbox_policy_for
from nodmix.tools import Tool, ToolContext, ToolPolicy, core_tools


class InvokeRequest(msgspec.Struct, kw_only=True, rename="camel"):
    """The body of `POST /tools/invoke`."""

    tool: str
    args: dict[str, Any] = {}
    session_key: str | None = None
    agent_id: str | None = None


async def agent_tools(runtime: Runtime, agent: AgentProfile) -> tuple[list[Tool], list[Tool]]:
    """Every tool the agent could have (core, plugins, MCP) and the ones its policy allows."""
    policy = ToolPolicy.from_config(runtime.config.tools).merged(agent.tools)
    isolation = agent_isolation(agent)
    candidates: list[Tool] = list(core_tools(runtime.config.tools, isolation=isolation))
    for source in runtime.tool_sources:
        candidates.extend(await source.list_tools())
    allowed = [] if policy.disables_tools else policy.filter(candidates)
    return candidates, allowed


_DECODER = msgspec.json.Decoder(InvokeRequest)


def _find(tools: list[Tool], name: str) -> Tool | None:
    return next((t for t in tools if name in (t.spec.name, t.origin.id)), None)


async def invoke_tool(request: Request) -> Response:
    """Run the tool and return its result."""
    gateway = gateway_of(request)
    body = decode_json(_DECODER, await request.body())
    agent = gateway.agent(body.agent_id)
    key = gateway.session_key(agent, body.session_key)
    result = await _invoke(gateway, agent, key, body)
    return JSONResponse(result)


async def _invoke(
    gateway: Gateway, agent: AgentProfile, key: str, body: InvokeRequest
) -> dict[str, Any]:
    runtime = gateway.runtime
    candidates, allowed = await agent_tools(runtime, agent)
    in_sandbox = sandbox_policy_for(runtime.config.tools, agent, key, None)
    if in_sandbox is not None:  # the sandbox tool policy of the session named
        allowed = in_sandbox.filter(allowed)
    tool = _find(allowed, body.tool)
    if tool is None:
        if _find(candidates, body.tool) is not None:
            raise APIError(
                status=403,
                message=f"tool {body.tool!r} is not allowed for agent {agent.id!r} in "
                f"session {key} (tools policy{', sandbox' if in_sandbox else ''})",
                kind="permission_error",
                code="tool_denied",
            )
        names = ", ".join(sorted(t.spec.name for t in allowed)) or "none"
        raise not_found(f"unknown tool {body.tool!r} (available: {names})", code="unknown_tool")
    refuse_unauthenticated_exec(gateway, tool)
    session = runtime.open_session(agent, key)
    run_id = f"invoke_{uuid.uuid4().hex[:16]}"
    ctx = ToolContext(
        agent_id=agent.id,
        session_key=key,
        session_id=session.session_id,
        run_id=run_id,
        call_id=f"call_{uuid.uuid4().hex[:16]}",
        workspace=agent.workspace,
    )
    with owner_call(runtime, run_id, key):
        result = await runtime.executor.run(tool, dict(body.args), ctx)
    return {
        "ok": not result.is_error,
        "tool": tool.spec.name,
        "toolId": tool.origin.id,
        "sessionKey": key,
        "result": {
            "text": result.text_content,
            "content": to_json(result.content),
            "details": to_json(result.details),
            "isError": result.is_error,
        },
    }
