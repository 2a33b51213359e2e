"""The items of a Responses `input` list as our messages, in any order a client sends them.

Clients that keep the conversation themselves resend it whole on every request (the OpenAI
Agents SDK's `to_input_list()`, LangChain with `use_responses_api`): user and assistant
`message`s, the `function_call`s a response ended with, the `function_call_output`s that
answered them, and `reasoning` items, interleaved. Each becomes what the session would have
recorded: an assistant message holding the text and the calls of one response, a tool result
per output (named after its call), a user message (with its `input_image` parts); `reasoning`
and `item_reference` items carry nothing a new session can use and are passed over.
`system`/`developer` messages are the client's instructions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nodmix.gateway.client_tools import result_message
from nodmix.gateway.errors import bad_request
from nodmix.gateway.media_parts import UserParts, image_part
from nodmix.messages import (
    AssistantBlock,
    AssistantMessage,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    user_message,
)
from nodmix.providers.arguments import parse_arguments

TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
PASSED_OVER = frozenset({"reasoning", "item_reference"})
"""Item types a session has no use for (a client echoes them back from earlier responses)."""


def item_parts(item: dict[str, Any], where: str, *, media: bool) -> UserParts:
    """The text of a message item (a string, or text parts; a refusal counts as text) and,
    with `media`, its `input_image` parts (inline `data:` URLs).

    Raises:
        APIError: a 400 for a part that is neither.
    """
    content = item.get("content")
    if isinstance(content, str):
        return UserParts(content)
    if not isinstance(content, list):
        raise bad_request(f"{where}: content must be a string or a list of parts", param=where)
    parts = UserParts("")
    texts: list[str] = []
    for number, part in enumerate(content):
        kind = part.get("type", "unknown") if isinstance(part, dict) else "unknown"
        if isinstance(part, dict) and kind in TEXT_PARTS:
            texts.append(str(part.get("text", "")))
        elif isinstance(part, dict) and kind == "refusal":
            texts.append(str(part.get("refusal", "")))
        elif isinstance(part, dict) and media and kind == "input_image":
            url = part.get("image_url")
            if url is None and part.get("file_id"):
                raise bad_request(
                    f"{where}: input_image with file_id is not supported; send image_url "
                    "as a data: URL",
                    param=f"{where}.content",
                )
            parts.media.append(image_part(url, f"{where}.content[{number}]"))
        else:
            taken = "input_text or input_image" if media else "text"
            raise bad_request(
                f"{where}: content part of type {kind!r} is not supported; send {taken}",
                param=f"{where}.content",
            )
    parts.text = "\n".join(texts)
    return parts


class _History:
    """Folds items into messages: consecutive assistant text and calls make one response."""

    def __init__(self) -> None:
        self.messages: list[Message | UserParts] = []
        self.system: list[str] = []
        self._blocks: list[AssistantBlock] = []
        self._names: dict[str, str] = {}

    def _flush(self) -> None:
        if self._blocks:
            calls = any(isinstance(block, ToolCallBlock) for block in self._blocks)
            self.messages.append(
                AssistantMessage(
                    content=tuple(self._blocks),
                    provider="client",
                    model="client",
                    stop_reason="toolUse" if calls else "stop",
                )
            )
            self._blocks = []

    def add(self, item: dict[str, Any], where: str) -> None:
        kind = item.get("type", "message")
        if kind in PASSED_OVER:
            return
        if kind == "function_call":
            self._call(item, where)
        elif kind == "function_call_output":
            self._flush()
            result = result_message(item.get("call_id"), item.get("output"), where=where)
            name = self._names.get(result.tool_call_id, "")
            self.messages.append(
                ToolResultMessage(
                    tool_call_id=result.tool_call_id,
                    tool_name=name,
                    content=result.content,
                    is_error=False,
                )
            )
        elif kind == "message":
            self._message(item, where)
        else:
            raise bad_request(
                f"{where}: items of type {kind!r} are not supported (send messages, "
                "function_call, function_call_output or reasoning items)",
                param=where,
            )

    def _call(self, item: dict[str, Any], where: str) -> None:
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise bad_request(f"{where}: a function_call needs a call_id and a name", param=where)
        arguments = item.get("arguments")
        parsed = parse_arguments(arguments) if isinstance(arguments, str) else {}
        self._names[call_id] = name
        self._blocks.append(ToolCallBlock(id=call_id, name=name, arguments=parsed))

    def _message(self, item: dict[str, Any], where: str) -> None:
        role = item.get("role")
        parts = item_parts(item, where, media=role == "user")
        text = parts.text
        if role == "assistant":
            if text:
                self._blocks.append(TextBlock(text=text))
            return
        self._flush()
        if role in ("system", "developer"):
            if text.strip():
                self.system.append(text.strip())
        elif role == "user":
            self.messages.append(parts if parts.media else user_message(text))
        else:
            raise bad_request(f"{where}: unknown message role {role!r}", param=f"{where}.role")

    def done(self) -> tuple[list[Message | UserParts], list[str]]:
        self._flush()
        return self.messages, self.system


def history(
    items: Iterable[tuple[int, dict[str, Any]]],
) -> tuple[list[Message | UserParts], list[str]]:
    """The messages and the instructions of `(index, item)` pairs of a request's `input`.

    Raises:
        APIError: a 400 naming the first item that cannot be read.
    """
    folded = _History()
    for index, item in items:
        if not isinstance(item, dict):
            raise bad_request(f"input[{index}]: an item must be an object", param=f"input[{index}]")
        folded.add(item, f"input[{index}]")
    return folded.done()
