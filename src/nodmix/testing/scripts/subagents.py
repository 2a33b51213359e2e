"""Built-in script `subagents`: delegates with the session tools, and works as a subagent.

The last user message decides:

- `spawn wait: A | B | C` calls `sessions_spawn` once per task, all in one reply, with
  `wait: true` (label = the task); `spawn: A | B` does the same without waiting. An
  `agent=ID` or `timeout=S` word after `spawn` sets `agentId` or `timeoutSeconds`.
- `fanout N [WORDS]` (code mode on) runs one `exec` program that spawns N subagents with
  `Promise.all` and `wait: true` (tasks `[WORDS ]topic <i>`) and returns
  `<label>=<status>:<reply>` for each; `waiting` is followed by `wait`.
- `send KEY MESSAGE` calls `sessions_send`; `history KEY` calls `sessions_history`;
  `list` calls `sessions_list`; `agents` calls `agents_list`.
- `use TOOL ARG` calls the offered tool named TOOL with ARG as its first string argument
  (`use exec id`, `use read MEMORY.md`), or with `KEY=VALUE` words as its arguments
  (`use write path=notes.md content=hi`); refused when the tool is not offered.
- A group message's sender prefix (`[Ann] spawn: ...`) is ignored.
- `sleep S TEXT` waits S seconds, then answers like any other task; `hang` never answers.
- Anything else is a task: the answer is `done: <task>`. Told that Nodmix restarted while it
  worked (`[Nodmix restarted ...]`), it answers its first task that way.

Once tool results are in, the answer lists each one: `<label or key>: <reply>` for a
finished subagent, `<key>: <status> (<error>)` otherwise, and the text of any other result.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio

from nodmix.messages import AssistantMessage, ToolResultMessage, UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply, ModelStall, ReplyToolCall
from nodmix.testing.scripts.code_mode import _answer as code_mode_answer
from nodmix.testing.scripts.echo import last_user_text
from nodmix.testing.scripts.tool_then_answer import trailing_results

_SENDER = re.compile(r"^\[[^\]\n]{1,64}\] (?!\[)")

FANOUT_PROGRAM = """const topics = Array.from({ length: %d }, (_, i) => `%stopic ${i}`);
const results = await Promise.all(
  topics.map((t) => tools.sessions_spawn({ task: t, label: t, wait: true })),
);
return results.map((r) => `${r.details.label}=${r.details.status}:${r.details.reply ?? ''}`);"""


def _line(result: ToolResultMessage) -> str:
    try:
        data: Any = json.loads(result.text)
    except ValueError:
        return result.text
    if not isinstance(data, dict) or "status" not in data:
        return result.text
    name = data.get("label") or data.get("sessionKey")
    if data["status"] == "completed":
        return f"{name}: {data.get('reply', '')}"
    if data["status"] == "accepted":
        return f"{name}: accepted as {data.get('runId')}"
    return f"{name}: {data['status']} ({data.get('error', '')})"


def _spawn(text: str) -> ModelReply:
    head, _, tasks = text.partition(":")
    words = head.split()
    args: dict[str, Any] = {"wait": "wait" in words}
    for word in words:
        if word.startswith("agent="):
            args["agentId"] = word.removeprefix("agent=")
        elif word.startswith("timeout="):
            args["timeoutSeconds"] = float(word.removeprefix("timeout="))
    calls = tuple(
        ReplyToolCall("sessions_spawn", {"task": task, "label": task[:40], **args})
        for task in (t.strip() for t in tasks.split("|"))
        if task
    )
    return ModelReply(tool_calls=calls)


def _use(request: ModelRequest, words: list[str]) -> ModelReply:
    offered = {tool.name: tool for tool in request.tools}
    tool = offered.get(words[1]) if len(words) > 1 else None
    if tool is None:
        return ModelReply.text(f"no tool {words[1] if len(words) > 1 else ''} offered")
    if words[2:] and all("=" in word for word in words[2:]):
        pairs = (word.partition("=") for word in words[2:])
        return ModelReply.tool_call(tool.name, {key: value for key, _, value in pairs})
    argument = " ".join(words[2:])
    properties = tool.parameters.get("properties") or {}
    key = next((k for k, v in properties.items() if v.get("type") == "string"), None)
    return ModelReply.tool_call(tool.name, {key: argument} if key else {})


async def respond(request: ModelRequest) -> ModelReply | ModelStall:
    """Delegate, or do a task (see the module docstring)."""
    results = trailing_results(request)
    offered = {tool.name for tool in request.tools}
    if results:
        if "exec" in offered and results[-1].tool_name in ("exec", "wait"):
            return code_mode_answer(results[-1])
        return ModelReply.text("\n".join(_line(r) for r in results))
    if request.messages and isinstance(request.messages[-1], AssistantMessage):
        return ModelReply.text("(nothing to do)")
    text = (last_user_text(request) or "").strip()
    if _SENDER.match(text):  # a group message names its sender first: "[Ann] ..."
        text = _SENDER.sub("", text, count=1)
    if text.startswith("[Nodmix restarted"):
        text = next((m.text for m in request.messages if isinstance(m, UserMessage)), text)
    words = text.split()
    verb = words[0] if words else ""
    if verb.startswith("spawn") and ":" in text:
        return _spawn(text)
    if verb == "fanout" and len(words) > 1 and "exec" in offered:
        prefix = "".join(f"{word} " for word in words[2:])
        return ModelReply.tool_call("exec", {"code": FANOUT_PROGRAM % (int(words[1]), prefix)})
    if verb == "send" and len(words) > 2:
        return ModelReply.tool_call(
            "sessions_send", {"sessionKey": words[1], "message": " ".join(words[2:])}
        )
    if verb == "history" and len(words) > 1:
        return ModelReply.tool_call("sessions_history", {"sessionKey": words[1]})
    if verb in ("list", "agents"):
        return ModelReply.tool_call("sessions_list" if verb == "list" else "agents_list", {})
    if verb == "use":
        return _use(request, words)
    if verb == "hang":
        return ModelStall()
    if verb == "sleep" and len(words) > 1:
        await anyio.sleep(float(words[1]))
        text = " ".join(words[2:])
    return ModelReply.text(f"done: {text}")
