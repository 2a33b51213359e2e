"""Built-in script `memory-search`: asks `memory_search` the user's message, answers with hits.

Each user message becomes one `memory_search` call with the whole message as the query (when
the request offers the tool); the answer lists the hits as `path:start-end (score)` lines,
followed by the best hit's snippet. With code mode on (the request offers `exec` and `wait`)
the call is made by an `exec` program that finds `memory_search` in the catalog, and a
`waiting` result is followed by `wait`. Without either it echoes, like `echo`.
"""

from __future__ import annotations

import json
from typing import Any

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.scripts.echo import last_user_text

SEARCH_PROGRAM = """const hit = ALL_TOOLS.find((tool) => tool.name === 'memory_search');
if (!hit) return 'memory_search is not available';
const result = await tools.call(hit.id, { query: %s });
return result.text;"""


def _report(text: str) -> ModelReply:
    try:
        results = json.loads(text)["results"]
    except (ValueError, KeyError, TypeError):
        return ModelReply.text(text)
    if not results:
        return ModelReply.text("Nothing in memory matches.")
    lines = [f"{r['path']}:{r['startLine']}-{r['endLine']} ({r['score']})" for r in results]
    return ModelReply.text("\n".join([*lines, "", results[0]["snippet"]]))


def _exec_result(text: str) -> ModelReply:
    try:
        data: Any = json.loads(text)
    except ValueError:
        return ModelReply.text(text)
    if not isinstance(data, dict):
        return ModelReply.text(text)
    if data.get("status") == "waiting":
        return ModelReply.tool_call("wait", {"runId": data["runId"]})
    if data.get("status") == "failed":
        error = data.get("error")
        detail = error.get("message") if isinstance(error, dict) else error
        return ModelReply.text(f"the program failed: {detail}")
    value = data.get("value")
    return _report(value if isinstance(value, str) else json.dumps(value))


def respond(request: ModelRequest) -> ModelReply:
    """Search memory for the user's message, then report the hits."""
    names = {tool.name for tool in request.tools}
    code_mode = "memory_search" not in names and {"exec", "wait"} <= names
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        return _exec_result(last.text) if code_mode else _report(last.text)
    text = last_user_text(request) or ""
    if code_mode:
        return ModelReply.tool_call("exec", {"code": SEARCH_PROGRAM % json.dumps(text)})
    if "memory_search" not in names:
        return ModelReply.text(text or "(no user message)")
    return ModelReply.tool_call("memory_search", {"query": text})
