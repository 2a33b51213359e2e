"""Tools an application brings to a turn, in the OpenAI shapes, and the way back with results.

A request's `tools` (`{"type": "function", "function": {name, description, parameters}}`)
join the run as client tools: plain tools when the agent runs in direct mode, catalog entries
`client:app:<name>` when it runs in code mode. They never run in the gateway. When the agent
calls one, the response ends with `finish_reason: "tool_calls"` and the call; the client runs
it and sends its result in the next request (a `tool` message in chat completions, a
`function_call_output` item in the Responses API), and the agent continues the same session.

A continuation finds its session like any request (the `x-nodmix-session-key` header, the
`user` field, or `previous_response_id`); a client that names none is matched by the ids of
the calls it answers (`session_pointers`), so a stateless client continues its one-shot
session, after a gateway restart too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from nodmix.gateway.errors import bad_request
from nodmix.messages import TextBlock, ToolCallBlock, ToolResultMessage
from nodmix.tools.base import Tool, ToolOrigin, ToolSpec
from nodmix.tools.deferred import DeferredTool

CLIENT_OWNER: Final = "app"
"""The owner part of client tool ids (`client:app:<name>`)."""
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


def client_tools(raw: Any, *, param: str = "tools") -> list[Tool]:
    """Client tools from a request's `tools` (chat-completions or Responses shape).

    Raises:
        APIError: a 400 naming the bad entry.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad_request(f"{param} must be an array", param=param)
    tools: list[Tool] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"{param}[{index}]"
        if not isinstance(item, dict) or item.get("type") != "function":
            kind = item.get("type") if isinstance(item, dict) else type(item).__name__
            raise bad_request(
                f"{where}: only tools of type 'function' are supported (got {kind!r})", param=where
            )
        spec = item.get("function", item)  # chat completions nest it; Responses do not
        name = spec.get("name") if isinstance(spec, dict) else None
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise bad_request(
                f"{where}: the function name must be 1-64 letters, digits, '_' or '-'", param=where
            )
        if name in seen:
            raise bad_request(f"{where}: duplicate function name {name!r}", param=where)
        seen.add(name)
        parameters = spec.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise bad_request(f"{where}: parameters must be a JSON Schema object", param=where)
        tools.append(
            DeferredTool(
                spec=ToolSpec(
                    name=name, description=str(spec.get("description") or ""), parameters=parameters
                ),
                origin=ToolOrigin(source="client", owner=CLIENT_OWNER, name=name),
            )
        )
    return tools


def tool_choice(raw: Any, tools: Sequence[Tool]) -> tuple[str | None, bool]:
    """`(choice for the run, disable tools)` from `tool_choice` (`none`, `auto`, `required`,
    or a named function in either API's shape).

    Raises:
        APIError: a 400 for an unknown value or a function the request does not offer.
    """
    if raw is None or raw == "auto":
        return None, False
    if raw == "none":
        return None, True
    if raw == "required":
        return "required", False
    name = None
    if isinstance(raw, dict) and raw.get("type") == "function":
        function = raw.get("function")
        name = function.get("name") if isinstance(function, dict) else raw.get("name")
    if not isinstance(name, str):
        raise bad_request(
            "tool_choice must be 'none', 'auto', 'required' or a function", param="tool_choice"
        )
    if name not in {tool.spec.name for tool in tools}:
        raise bad_request(
            f"tool_choice names function {name!r}, which is not in tools", param="tool_choice"
        )
    return name, False


def result_message(call_id: Any, output: Any, *, where: str) -> ToolResultMessage:
    """A client's tool result (its text, or the text parts of a list).

    Raises:
        APIError: no call id.
    """
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}: the tool call id is missing", param=where)
    if isinstance(output, list):
        text = "\n".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    elif isinstance(output, str):
        text = output
    else:
        text = json.dumps(output, ensure_ascii=False)
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="", content=(TextBlock(text=text),), is_error=False
    )


def arguments_json(call: ToolCallBlock) -> str:
    """A call's arguments as the JSON string OpenAI clients expect."""
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
