"""Built-in script `web-task`: "search, open the first result, fill its form, report what the
page says", with `web_search` and `browser` (or, in code mode, one `exec` program doing it).

The user message is `search <query> and send the form as <name>`. Direct mode: `web_search`
the query; `browser navigate` to the first result's URL; `browser type` the name into the first
textbox; `browser click` the first button; answer with the page's paragraphs. Code mode: the
same steps as one program through `tools.web_search(...)` and `tools.browser(...)`.
"""

from __future__ import annotations

import json
import re

from nodmix.messages import AssistantMessage, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.scripts.code_mode import _answer
from nodmix.testing.scripts.echo import last_user_text

_TASK = re.compile(r"search (?P<query>.+?) and send the form as (?P<name>.+)", re.IGNORECASE)
_URL = re.compile(r"^\s+(https?://\S+)$", re.MULTILINE)
_TEXTBOX = re.compile(r'- textbox "[^"]*" \[ref=(\w+)\]')
_BUTTON = re.compile(r'- button "[^"]*" \[ref=(\w+)\]')
_PARAGRAPH = re.compile(r"- paragraph: (.+)$", re.MULTILINE)

PROGRAM = """const found = await tools.web_search({ query: %s });
const url = found.details.results[0].url;
let page = await tools.browser({ action: 'navigate', url });
const ref = (re) => page.text.match(re)[1];
page = await tools.browser({ action: 'type', ref: ref(/- textbox "[^"]*" \\[ref=(\\w+)\\]/),
  text: %s });
page = await tools.browser({ action: 'click', ref: ref(/- button "[^"]*" \\[ref=(\\w+)\\]/) });
const said = [...page.text.matchAll(/- paragraph: (.+)$/gm)].map((m) => m[1]);
return `${url} says: ${said.join(' ')}`;"""


def _last_call(request: ModelRequest) -> tuple[str, dict[str, object]] | None:
    for message in reversed(request.messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            call = message.tool_calls[-1]
            return call.name, call.arguments
    return None


def respond(request: ModelRequest) -> ModelReply:
    """One step of the task, chosen by the last tool call and its result."""
    task = _TASK.search(last_user_text(request) or "")
    if task is None:
        return ModelReply.text("Say: search <query> and send the form as <name>.")
    query, name = task.group("query"), task.group("name").strip().rstrip(".")
    names = {tool.name for tool in request.tools}
    last = request.messages[-1] if request.messages else None
    if "exec" in names and "browser" not in names:
        if isinstance(last, ToolResultMessage):
            return _answer(last)
        return ModelReply.tool_call(
            "exec", {"code": PROGRAM % (json.dumps(query), json.dumps(name))}
        )
    if not isinstance(last, ToolResultMessage):
        return ModelReply.tool_call("web_search", {"query": query})
    if last.is_error:
        return ModelReply.text(f"That failed: {last.text}")
    previous = _last_call(request)
    action = previous[1].get("action") if previous else None
    if previous and previous[0] == "web_search":
        url = _URL.search(last.text)
        if url is None:
            return ModelReply.text("The search found nothing.")
        return ModelReply.tool_call("browser", {"action": "navigate", "url": url.group(1)})
    if action == "navigate":
        box = _TEXTBOX.search(last.text)
        if box is None:
            return ModelReply.text("The page has no form.")
        return ModelReply.tool_call(
            "browser", {"action": "type", "ref": box.group(1), "text": name}
        )
    if action == "type":
        button = _BUTTON.search(last.text)
        if button is None:
            return ModelReply.text("The form has no button.")
        return ModelReply.tool_call("browser", {"action": "click", "ref": button.group(1)})
    said = " ".join(_PARAGRAPH.findall(last.text))
    return ModelReply.text(f"The page says: {said}")
