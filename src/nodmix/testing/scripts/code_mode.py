"""Built-in script `code-mode`: shows code mode without a paid key (`tools.codeMode` on).

When the request offers `exec` (code mode is on), the first reply is an `exec` program:

- "read notes.txt" -> searches the hidden catalog for a read tool, calls it on the path and
  returns the text (`tools.search` + `tools.call`);
- "use get_weather Paris" -> calls the catalog tool named `get_weather` (a client app's tool,
  say) with "Paris" as its first string argument and returns the text;
- anything else -> searches the catalog for the message's words and returns the best tool ids
  with their descriptions.

A `waiting` result is followed by `wait`; a finished run is answered with its value, and a
failed one with its error. Without `exec` (code mode off) it behaves like `tool-then-answer`.
"""

from __future__ import annotations

import json

from nodmix.messages import AssistantMessage, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.scripts import tool_then_answer
from nodmix.testing.scripts.echo import last_user_text

READ_PROGRAM = """const hits = await tools.search('read file');
const read = hits.find((hit) => hit.id.endsWith(':read')) ?? hits[0];
const result = await tools.call(read.id, { path: %s });
return result.text;"""

USE_PROGRAM = """const name = %s;
const hit = ALL_TOOLS.find((tool) => tool.name === name);
if (!hit) return `no tool named ${name}`;
const schema = (await tools.describe(hit.id)).parameters ?? {};
const props = schema.properties ?? {};
const key = Object.keys(props).find((k) => props[k].type === 'string');
const result = await tools.call(hit.id, key ? { [key]: %s } : {});
return result.text;"""

SEARCH_PROGRAM = """const hits = await tools.search(%s, { limit: 5 });
return hits.map((hit) => `${hit.id}: ${hit.description}`).join('\\n');"""

_READ_VERBS = frozenset({"read", "show", "open", "cat"})


def program_for(text: str) -> str:
    """The `exec` program the script writes for a user message."""
    words = text.split()
    if len(words) >= 2 and words[0].lower() == "use":
        argument = " ".join(words[2:]) or "."
        return USE_PROGRAM % (json.dumps(words[1]), json.dumps(argument))
    if words and words[0].lower() in _READ_VERBS:
        path = tool_then_answer._target(tool_then_answer._words(" ".join(words[1:])))
        return READ_PROGRAM % json.dumps(path)
    return SEARCH_PROGRAM % json.dumps(text or "tools")


def _answer(result: ToolResultMessage) -> ModelReply:
    try:
        data = json.loads(result.text)
    except ValueError:
        return ModelReply.text(result.text)
    if data.get("status") == "waiting":
        return ModelReply.tool_call("wait", {"runId": data["runId"]})
    if data.get("status") == "failed":
        error = data.get("error")
        detail = error.get("message") if isinstance(error, dict) else error
        return ModelReply.text(f"the program failed: {detail}")
    value = data.get("value")
    return ModelReply.text(value if isinstance(value, str) else json.dumps(value))


def respond(request: ModelRequest) -> ModelReply:
    """Write an `exec` program; follow `waiting` with `wait`; answer with the value."""
    if not any(tool.name == "exec" for tool in request.tools) or not any(
        tool.name == "wait" for tool in request.tools
    ):
        return tool_then_answer.respond(request)
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        return _answer(last)
    if isinstance(last, AssistantMessage):
        return ModelReply.text("(nothing to do)")
    return ModelReply.tool_call("exec", {"code": program_for(last_user_text(request) or "")})
