"""The scripted model of the bad-day campaign (`bad_day.py`), and what it learns from requests.

One respond function serves every agent of the campaign's gateway:

- chat turns `turn <session> <n> <filler>` (agents `inplace` and `rotate`, a 6,000-token
  window): the reply is `ack <session> <n>` plus filler, ~1.5 KB each way, so auto-compaction
  fires every few turns;
- summaries (compaction): `SUMMARY covers <session>:<n> ...`, listing the newest turns the
  request shows, earlier summaries included, so a later request proves which turns the model
  still knows about;
- the memory flush before a compaction: a plain answer;
- code mode (agent `main`): `go` resumes the newest run of the session that the history shows
  `waiting` and unresolved, else runs PROGRAM (a `nap` tool call that outlasts the step, so
  `exec` answers `waiting`); every `waiting` result is answered with `wait`;
- cron runs (agent `cronner`): a `nap` tool call, then `tock`.

Each chat request is checked as it arrives: it must show the session's last acknowledged turn,
verbatim or in a summary (`Context.check`).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from nodmix.compaction.prompts import SUMMARIZER_SYSTEM
from nodmix.messages import AssistantMessage, Message, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply

FILLER = " ".join(f"w{i:04d}" for i in range(280))  # ~1.5 KB
TURN = re.compile(r"turn ([\w-]+) (\d+) ")
LISTED = re.compile(r"([\w-]+):(\d+)")
SUMMARY_TURNS = 20

PROGRAM = """
const note = await tools.read({ path: "notes.txt" });
let rest;
try {
  rest = { nap: (await tools.nap({})).text };
} catch (e) {
  rest = { caught: e.message };
}
const again = await tools.read({ path: "notes.txt" });
return { note: note.text.trim(), same: again.text === note.text, ...rest };
"""


def _text(message: Message) -> str:
    return getattr(message, "text", "") or ""


def turns_shown(messages: list[Message], extra: str = "") -> set[tuple[str, int]]:
    """Every `(session, n)` a request shows: verbatim turns and turns listed in summaries."""
    out: set[tuple[str, int]] = set()
    for text in [extra, *(_text(m) for m in messages)]:
        for match in TURN.finditer(text):
            out.add((match.group(1), int(match.group(2))))
        if "SUMMARY covers" in text:
            for name, n in LISTED.findall(text.split("SUMMARY covers", 1)[1]):
                out.add((name, int(n)))
    return out


def summary(shown: set[tuple[str, int]]) -> str:
    """`SUMMARY covers ...` with the newest `SUMMARY_TURNS` turns of each session (a summary
    stays short, as a model's would: Nodmix caps its length, and cuts what is over)."""
    newest: dict[str, list[int]] = {}
    for name, n in sorted(shown):
        newest.setdefault(name, []).append(n)
    listed = [f"{name}:{n}" for name, turns in newest.items() for n in turns[-SUMMARY_TURNS:]]
    return "SUMMARY covers " + ",".join(listed) + " ."


def pending_runs(messages: list[Message]) -> list[str]:
    """Run ids the history shows `waiting` that no later result settles, oldest first."""
    waiting: dict[str, None] = {}
    wait_of: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.name == "wait":
                    wait_of[call.id] = str(call.arguments.get("runId", ""))
        elif isinstance(message, ToolResultMessage) and message.tool_name in ("exec", "wait"):
            try:
                result = json.loads(message.text)
            except ValueError:
                continue  # "the turn was interrupted" placeholders and the like
            resumed = wait_of.get(message.tool_call_id)
            if resumed is not None and (
                result.get("status") != "waiting" or result.get("runId") != resumed
            ):
                waiting.pop(resumed, None)
            if result.get("status") == "waiting":
                waiting[str(result["runId"])] = None
    return list(waiting)


@dataclass
class Context:
    """What the client was told, to check each request against (shared with the driver)."""

    acked: dict[str, int] = field(default_factory=dict)
    """Session -> the highest turn whose reply reached the client."""
    lost: list[str] = field(default_factory=list)
    """Requests that did not show the session's last acknowledged turn."""
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, name: str, n: int, messages: list[Message]) -> None:
        with self.lock:
            last = self.acked.get(name)
            self.requests += 1
        if last is None or last >= n:
            return
        shown = turns_shown(messages[:-1])
        if (name, last) not in shown:
            self.lost.append(f"{name} turn {n}: turn {last} not shown ({len(messages)} messages)")


def make_respond(context: Context) -> Any:
    """The respond function of the campaign's model server."""

    def respond(request: ModelRequest) -> ModelReply:
        messages = list(request.messages)
        last = messages[-1]
        if request.system.startswith(SUMMARIZER_SYSTEM):
            return ModelReply.text(summary(turns_shown(messages)))
        text = _text(last)
        if isinstance(last, ToolResultMessage):
            if last.tool_name == "nap":
                return ModelReply.text("tock")
            pending = pending_runs(messages)
            if pending:
                return ModelReply.tool_call("wait", {"runId": pending[-1]})
            return ModelReply.text("done " + last.text[:200])
        if text.startswith("[Housekeeping"):
            return ModelReply.text("nothing to save")
        match = TURN.match(text)  # (at the start: a turn's own message)
        if match is not None:
            name, n = match.group(1), int(match.group(2))
            context.check(name, n, messages)
            return ModelReply.text(f"ack {name} {n} {FILLER}")
        if text.strip() == "go":
            pending = pending_runs(messages)
            if pending:
                return ModelReply.tool_call("wait", {"runId": pending[-1]})
            return ModelReply.tool_call("exec", {"code": PROGRAM})
        if "cron tick" in text:
            return ModelReply.tool_call("nap", {})
        return ModelReply.text("ok")

    return respond
