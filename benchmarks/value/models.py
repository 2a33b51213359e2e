"""Scripted models for the workflow benchmark: they read the request the way a model would (the
JSON text of tool results) and answer with tool calls or a final text.

`DirectModel` plays a workflow's direct-mode script. `CodeModel` first runs a discovery program
(`tools.search` for each capability it needs, `tools.describe` of the best hit), picks the
expected tool from the hits it got back (an extra `exec` to describe it when search did not rank
it first, or to look it up in `ALL_TOOLS` when search missed it), then runs the workflow's
program and answers from its value, following `waiting` results with `wait`.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.value.workflows import Workflow
from nodmix.messages import AssistantMessage, ToolCallBlock, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply, ReplyToolCall

DISCOVERY = """
const needs = NEEDS;
const found = {};
for (const [key, query] of Object.entries(needs)) {
  const hits = await tools.search(query, { limit: 3 });
  found[key] = hits.map((h) => ({ id: h.id, name: h.name, description: h.description }));
  if (hits.length) found[key][0].parameters = (await tools.describe(hits[0].id)).parameters;
}
return found;
"""
DESCRIBE = "return await Promise.all(REFS.map((ref) => tools.describe(ref)));"


class BenchmarkError(RuntimeError):
    """A scripted run went off its script (a tool failed, a program failed...)."""


def _answer(facts: Any) -> ModelReply:
    return ModelReply.text("Here is what I found:\n" + json.dumps(facts, indent=1))


def last_results(request: ModelRequest) -> list[ToolResultMessage]:
    """The results of the latest assistant step's tool calls, in call order."""
    messages = list(request.messages)
    index = max(i for i, m in enumerate(messages) if isinstance(m, AssistantMessage))
    assistant = messages[index]
    assert isinstance(assistant, AssistantMessage)
    ids = [b.id for b in assistant.content if isinstance(b, ToolCallBlock)]
    by_id = {m.tool_call_id: m for m in messages[index + 1 :] if isinstance(m, ToolResultMessage)}
    return [by_id[i] for i in ids]


def _parse(message: ToolResultMessage) -> Any:
    if message.is_error:
        raise BenchmarkError(f"{message.tool_name} failed: {message.text[:300]}")
    try:
        return json.loads(message.text)
    except json.JSONDecodeError:
        return message.text


class _Ids:
    """Call ids numbered per turn (the server's own counter spans turns, so lengths drift)."""

    def __init__(self) -> None:
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"call_{self.count}"


class DirectModel:
    """A workflow's direct-mode script as a respond function."""

    def __init__(self, workflow: Workflow) -> None:
        self.ids = _Ids()
        self.workflow = workflow
        self.script = workflow.direct()
        self.started = False
        self.facts: Any = None
        self.tool_calls = 0
        self.result_chars = 0

    def __call__(self, request: ModelRequest) -> ModelReply:
        try:
            if not self.started:
                self.started = True
                calls = next(self.script)
            else:
                results = last_results(request)
                self.result_chars += sum(len(r.text) for r in results)
                calls = self.script.send([_parse(r) for r in results])
        except StopIteration as stop:
            self.facts = stop.value
            return _answer(stop.value)
        self.tool_calls += len(calls)
        return ModelReply(
            tool_calls=tuple(ReplyToolCall(c.name, c.args, self.ids.next()) for c in calls)
        )


class CodeModel:
    """A workflow's code-mode script as a respond function."""

    def __init__(self, workflow: Workflow) -> None:
        self.calls = _Ids()
        self.workflow = workflow
        self.phase = "start"
        self.ids: dict[str, str] = {}
        self.pending: dict[str, str] = {}
        self.facts: Any = None
        self.misses: list[str] = []
        """Capabilities whose expected tool was not ranked first by `tools.search`."""
        self.results: list[dict[str, Any]] = []

    def _exec(self, code: str) -> ModelReply:
        return ModelReply.tool_call("exec", {"code": code.strip()}, id=self.calls.next())

    def __call__(self, request: ModelRequest) -> ModelReply:
        if self.phase == "start":
            self.phase = "discovered"
            needs = {k: q for k, (q, _) in self.workflow.discovery.items()}
            return self._exec(DISCOVERY.replace("NEEDS", json.dumps(needs)))
        (message,) = last_results(request)
        data = json.loads(message.text)
        self.results.append(data)
        if data["status"] == "waiting":
            return ModelReply.tool_call("wait", {"runId": data["runId"]}, id=self.calls.next())
        if data["status"] != "completed":
            raise BenchmarkError(f"{self.workflow.name}: {data.get('code')}: {data['error']}")
        return self._next(data["value"])

    def _next(self, value: Any) -> ModelReply:
        if self.phase == "discovered":
            return self._choose(value)
        if self.phase == "described":
            for key, entry in zip(self.pending, value, strict=True):
                self.ids[key] = entry["id"]
            return self._run()
        self.facts = value
        return _answer(value)

    def _choose(self, found: dict[str, list[dict[str, Any]]]) -> ModelReply:
        for key, (_, expected) in self.workflow.discovery.items():
            hits = found.get(key, [])
            names = [h["name"] for h in hits]
            if names[:1] == [expected]:
                self.ids[key] = hits[0]["id"]
                continue
            # Ranked 2nd or 3rd: the model reads the descriptions and describes its pick. Not
            # in the top 3: it finds the tool by name in ALL_TOOLS and describes that.
            self.misses.append(key)
            self.pending[key] = hits[names.index(expected)]["id"] if expected in names else expected
        if not self.pending:
            return self._run()
        self.phase = "described"
        return self._exec(DESCRIBE.replace("REFS", json.dumps(list(self.pending.values()))))

    def _run(self) -> ModelReply:
        self.phase = "ran"
        return self._exec(self.workflow.code(self.ids))
