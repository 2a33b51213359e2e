"""Built-in script `tool-then-answer`: one tool call when asked to read or list, then answer.

- "read notes.txt" with a `read` tool offered -> calls `read` with `{"path": "notes.txt"}`.
- "list the files in src" with an `ls` tool -> calls `ls` with `{"path": "src"}`; with no
  path given ("list the current directory") the path is `.`.
- A message that names an offered tool ("use web_fetch https://example.com") calls that
  tool with the next word as its first string argument.
- Once the tool results are in, the answer is their text, verbatim.
- Anything else is echoed back, like the `echo` script.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nodmix.messages import AssistantMessage, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.scripts.echo import last_user_text
from nodmix.tools.base import ToolSpec

VERB_TOOLS = {
    "read": ("read", "read_file", "cat", "view"),
    "show": ("read", "read_file", "cat", "view"),
    "open": ("read", "read_file", "cat", "view"),
    "list": ("ls", "list", "list_dir", "list_files", "glob"),
    "ls": ("ls", "list", "list_dir", "list_files", "glob"),
}
"""Words that ask for reading or listing -> tool names that do it, in order of preference."""

_FILLER = frozenset(
    "a an the this that my me please file files folder directory dir contents content of in"
    " from at for called named current whats what's is are all".split()
)
_WORD = re.compile(r"[^\s\"'`]+")


def _words(text: str) -> list[str]:
    words = []
    for raw in _WORD.findall(text):
        word = raw.strip("()[]{}<>")
        if word not in (".", ".."):
            word = word.rstrip(".,;:!?")
        if word:
            words.append(word)
    return words


def _pick_tool(words: Sequence[str], tools: Sequence[ToolSpec]) -> tuple[ToolSpec, int] | None:
    """The tool to call and the index of the word that chose it."""
    by_name = {tool.name: tool for tool in tools}
    for index, word in enumerate(words):
        if word in by_name:
            return by_name[word], index
    for index, word in enumerate(words):
        for candidate in VERB_TOOLS.get(word.lower(), ()):
            if candidate in by_name:
                return by_name[candidate], index
    return None


def _target(words: Sequence[str]) -> str:
    return next((w for w in words if w.lower() not in _FILLER), ".")


def _arguments(tool: ToolSpec, target: str) -> dict[str, str]:
    properties = tool.parameters.get("properties") or {}
    if "path" in properties:
        return {"path": target}
    required = tool.parameters.get("required") or []
    strings = [name for name, schema in properties.items() if schema.get("type") == "string"]
    for name in [*required, *strings]:
        if name in strings:
            return {name: target}
    return {}


def trailing_results(request: ModelRequest) -> list[ToolResultMessage]:
    """The tool results that end the request (those answering the model's last calls)."""
    results: list[ToolResultMessage] = []
    for message in reversed(request.messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.append(message)
    return results[::-1]


def respond(request: ModelRequest) -> ModelReply:
    """Call a read/list tool once, then answer with its result; otherwise echo."""
    results = trailing_results(request)
    if results:
        return ModelReply.text("\n".join(r.text for r in results) or "(the tool returned nothing)")
    if request.messages and isinstance(request.messages[-1], AssistantMessage):
        return ModelReply.text("(nothing to do)")
    text = last_user_text(request) or ""
    words = _words(text)
    picked = _pick_tool(words, request.tools)
    if picked is None:
        return ModelReply.text(text or "(no user message)")
    tool, index = picked
    return ModelReply.tool_call(tool.name, _arguments(tool, _target(words[index + 1 :])))
