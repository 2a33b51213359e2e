"""OpenAI Responses API requests in Nodmix terms, and the response objects sent back.

The mapping rule (also in docs/gateway.md):

- `model` is `nodmix` or `nodmix/<agentId>`, as for chat completions.
- The session is the one of `previous_response_id` when given, else the
  `x-nodmix-session-key` header, else `user`, else a fresh one-shot session.
- `input` is a string (the prompt) or a list of items. The last item is a `user` message
  (the prompt), or the last items are `function_call_output`s: results of the client tool calls
  the previous response ended with, and the turn continues from them. Earlier items, of any
  type and in any order (messages, `function_call`, `function_call_output`, `reasoning`), seed
  a new session with the conversation they tell (`responses_items.py`); a session that already
  has messages keeps its own.
- `input_image` parts (inline `data:` URLs) are saved under the agent's `inbox/` and reach a
  vision model as images (`media_parts`); `input_file` and remote image URLs are refused.
- `instructions` are recorded, like `system` messages, as the client's instructions when the
  session starts.
- `tools` of type `function` are client tools; `tool_choice` is honoured for the first model
  call.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from nodmix.gateway.client_tools import arguments_json, result_message
from nodmix.gateway.errors import bad_request
from nodmix.gateway.limits import decode_json
from nodmix.gateway.media_parts import InlineMedia, UserParts
from nodmix.gateway.openai_mapping import SYSTEM_NOTE_INTRO
from nodmix.gateway.responses_items import PASSED_OVER, history, item_parts
from nodmix.messages import (
    Message,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
)


class ResponsesRequest(msgspec.Struct, kw_only=True):
    """The parts of a Responses request the gateway honours (others are ignored)."""

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: Any = None
    tool_choice: Any = None
    stream: bool = False
    previous_response_id: str | None = None
    store: bool = True
    user: str | None = None
    metadata: dict[str, str] | None = None


_DECODER = msgspec.json.Decoder(ResponsesRequest)


class TurnInput(msgspec.Struct, kw_only=True):
    """What a Responses request asks of the agent."""

    prompt: str = ""
    media: list[InlineMedia] = msgspec.field(default_factory=list)
    """Images that came with the prompt."""
    results: list[ToolResultMessage] | None = None
    """Client tool results: continue the session instead of a new prompt."""
    note: str | None = None
    history: list[Message | UserParts] = msgspec.field(default_factory=list)


def parse_request(body: bytes) -> ResponsesRequest:
    """Decode and check a request body.

    Raises:
        APIError: a 400 naming what is wrong.
    """
    request = decode_json(_DECODER, body)
    if isinstance(request.input, list) and not request.input:
        raise bad_request("input must not be empty", param="input")
    return request


def turn_input(request: ResponsesRequest) -> TurnInput:
    """The prompt or tool results, and what a new session is seeded with.

    Raises:
        APIError: a 400 for an item that cannot be read, or a list that does not end with a
            user message or tool outputs.
    """
    system = [request.instructions.strip()] if request.instructions else []
    if isinstance(request.input, str):
        return TurnInput(prompt=request.input, note=_note(system))
    items = [
        (index, item)
        for index, item in enumerate(request.input)
        if not (isinstance(item, dict) and item.get("type") in PASSED_OVER)
    ]
    trailing: list[ToolResultMessage] = []
    while items and _kind(items[-1][1]) == "function_call_output":
        index, item = items.pop()
        trailing.append(
            result_message(item.get("call_id"), item.get("output"), where=f"input[{index}]")
        )
    if trailing:  # the session that made the calls has everything before them
        return TurnInput(results=trailing[::-1])
    last = items[-1][1] if items else None
    if last is None or _kind(last) != "message" or last.get("role") != "user":
        raise bad_request(
            "input must end with a user message or function_call_output items", param="input"
        )
    messages, instructions = history(items[:-1])
    prompt = item_parts(last, f"input[{items[-1][0]}]", media=True)
    return TurnInput(
        prompt=prompt.text, media=prompt.media, note=_note(system + instructions), history=messages
    )


def _kind(item: object) -> str | None:
    return str(item.get("type", "message")) if isinstance(item, dict) else None


def _note(system: list[str]) -> str | None:
    return f"{SYSTEM_NOTE_INTRO}\n\n" + "\n\n".join(system) if system else None


class ResponseObject:
    """Builds the `response` object of one request (its id, items and final shape)."""

    def __init__(self, request: ResponsesRequest) -> None:
        """Start a response to `request`."""
        self.id = f"resp_{uuid.uuid4().hex}"
        self.message_id = f"msg_{uuid.uuid4().hex}"
        self.created_at = int(time.time())
        self.request = request

    def message_item(self, text: str, status: str = "completed") -> dict[str, Any]:
        """The assistant message output item."""
        content = [] if status == "in_progress" else [self.text_part(text)]
        return {
            "type": "message",
            "id": self.message_id,
            "status": status,
            "role": "assistant",
            "content": content,
        }

    @staticmethod
    def text_part(text: str) -> dict[str, Any]:
        """An `output_text` content part."""
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    @staticmethod
    def call_item(call: ToolCallBlock, status: str = "completed") -> dict[str, Any]:
        """A `function_call` output item (a client tool the turn stopped for)."""
        return {
            "type": "function_call",
            "id": f"fc_{call.id}",
            "call_id": call.id,
            "name": call.name,
            "arguments": arguments_json(call) if status == "completed" else "",
            "status": status,
        }

    def body(
        self,
        *,
        status: str,
        output: Sequence[dict[str, Any]] = (),
        usage: Usage | None = None,
        stop_reason: str = "stop",
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The `response` object."""
        request = self.request
        incomplete = None
        if status == "completed" and stop_reason in ("length", "max_steps"):
            status = "incomplete"
            incomplete = {"reason": "max_output_tokens"}
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": request.model,
            "output": list(output),
            "error": error,
            "incomplete_details": incomplete,
            "instructions": request.instructions,
            "metadata": request.metadata or {},
            "parallel_tool_calls": True,
            "previous_response_id": request.previous_response_id,
            "store": request.store,
            "temperature": None,
            "text": {"format": {"type": "text"}},
            "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
            "tools": request.tools or [],
            "top_p": None,
            "truncation": "disabled",
            "user": request.user,
            "usage": _usage(usage) if usage is not None else None,
        }

    def output(self, reply: str, calls: Sequence[ToolCallBlock]) -> list[dict[str, Any]]:
        """The output items of a finished turn: its text, then the client calls."""
        items = [self.message_item(reply)] if reply or not calls else []
        return items + [self.call_item(call) for call in calls]


def _usage(usage: Usage) -> dict[str, Any]:
    prompt = usage.input + usage.cache_read + usage.cache_write
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + usage.output,
    }
