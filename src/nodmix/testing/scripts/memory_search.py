"""Built-in script `memory-search`: asks `memory_search` the user's message, answers with hits.

Each user message becomes one `memory_search` call with the whole message as the query (when
the request offers the tool); the answer lists the hits as `path:start-end (score)` lines,
followed by the best hit's snippet. Without the tool it echoes, like `echo`.
"""

from __future__ import annotations

import json

from nodmix.messages import ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.scripts.echo import last_user_text


def respond(request: ModelRequest) -> ModelReply:
    """Search memory for the user's message, then report the hits."""
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        try:
            results = json.loads(last.text)["results"]
        except (ValueError, KeyError, TypeError):
            return ModelReply.text(last.text)
        if not results:
            return ModelReply.text("Nothing in memory matches.")
        lines = [f"{r['path']}:{r['startLine']}-{r['endLine']} ({r['score']})" for r in results]
        return ModelReply.text("\n".join([*lines, "", results[0]["snippet"]]))
    text = last_user_text(request) or ""
    if not any(tool.name == "memory_search" for tool in request.tools):
        return ModelReply.text(text or "(no user message)")
    return ModelReply.tool_call("memory_search", {"query": text})
