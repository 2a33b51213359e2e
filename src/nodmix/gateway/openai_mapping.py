"""OpenAI chat-completions requests in Nodmix terms, and the response shapes sent back.

The mapping rule (also in docs/gateway.md):

- `model` is `nodmix` (the default agent, `main`) or `nodmix/<agentId>`.
- The session key is the `x-nodmix-session-key` header, else the `user` field, else a fresh
  session `openai:<random>` for this request only. A key is resolved like everywhere else: a
  bare name is a session of the chosen agent, `agent:<id>:<name>` is taken as is.
- The last message must be a `user` message; its text is the turn's prompt. Or the last
  messages are `tool` messages: results of the client tool calls the previous response
  ended with, and the turn continues from them (see `client_tools`).
- Earlier messages seed the session only when it has no messages yet, so a stateless client
  that resends its whole history gets that history once and the gateway's own transcript
  afterwards. `system` and `developer` messages become one leading note the model reads as
  client instructions; `user` and `assistant` texts are recorded as they are; `tool` messages
  and assistant tool calls are dropped (they were answered in their own turns).
- `image_url` parts (inline `data:` URLs) and `input_audio` parts are saved under the agent's
  `inbox/` and reach a vision model as images, the transcription endpoint as audio
  (`media_parts`); other part types are refused with a 400.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from nodmix.gateway.client_tools import arguments_json, result_message
from nodmix.gateway.errors import bad_request
from nodmix.gateway.limits import decode_json
from nodmix.gateway.media_parts import UserParts, audio_part, image_part
from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    user_message,
)
from nodmix.providers.openai.encode import usage_to_openai

MODEL_PREFIX = "nodmix"
SYSTEM_NOTE_TYPE = "openai.system"
"""`customType` of the transcript entry holding a client's system messages."""
SYSTEM_NOTE_INTRO = "Instructions from the client application for this conversation:"


class StreamOptions(msgspec.Struct, kw_only=True):
    """`stream_options`."""

    include_usage: bool = False


class ChatMessage(msgspec.Struct, kw_only=True):
    """One entry of `messages` (fields the gateway does not use are ignored)."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ChatRequest(msgspec.Struct, kw_only=True):
    """The parts of a chat-completions request the gateway honours.

    Sampling knobs (`temperature`, `max_tokens`, ...) are accepted and ignored: the agent's
    own configuration decides them. `tools` are the client's tools, `tool_choice` applies to
    the turn's first model call (`"none"` runs the turn without any tools).
    """

    model: str
    messages: list[ChatMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    tools: Any = None
    tool_choice: Any = None

    @property
    def include_usage(self) -> bool:
        """Whether a streamed response ends with a usage chunk."""
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)


_DECODER = msgspec.json.Decoder(ChatRequest)


def parse_request(body: bytes) -> ChatRequest:
    """Decode and check a request body.

    Raises:
        APIError: a 400 naming what is wrong.
    """
    request = decode_json(_DECODER, body)
    if not request.messages:
        raise bad_request("messages must not be empty", param="messages")
    if request.messages[-1].role not in ("user", "tool"):
        raise bad_request("the last message must have role 'user' or 'tool'", param="messages")
    return request


def agent_of_model(model: str) -> str | None:
    """`nodmix` -> None (the default agent), `nodmix/<id>` -> `<id>`; anything else is foreign.

    Raises:
        ValueError: not a Nodmix model name (the caller answers 404).
    """
    if model == MODEL_PREFIX:
        return None
    prefix, sep, agent_id = model.partition("/")
    if prefix != MODEL_PREFIX or not sep or not agent_id:
        raise ValueError(model)
    return agent_id


def message_parts(message: ChatMessage, index: int, *, media: bool = True) -> UserParts:
    """The text of a message, and its images and audio (`media` false: text only).

    Raises:
        APIError: unknown parts, media where only text is taken, malformed media.
    """
    content = message.content
    if content is None or isinstance(content, str):
        return UserParts(content or "")
    parts = UserParts("")
    texts: list[str] = []
    for number, part in enumerate(content):
        kind = part.get("type", "unknown")
        where = f"messages[{index}].content[{number}]"
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif media and kind == "image_url":
            url = part.get("image_url")
            parts.media.append(image_part(url.get("url") if isinstance(url, dict) else url, where))
        elif media and kind == "input_audio":
            parts.media.append(audio_part(part, where))
        else:
            taken = "text, image_url or input_audio" if media else "text"
            raise bad_request(
                f"messages[{index}]: content part of type {kind!r} is not supported; send {taken}",
                param=f"messages[{index}].content",
            )
    parts.text = "\n".join(texts)
    return parts


def message_text(message: ChatMessage, index: int) -> str:
    """The text of a message whose list content must be text parts only.

    Raises:
        APIError: the content holds images, audio or unknown parts.
    """
    return message_parts(message, index, media=False).text


def prompt_parts(request: ChatRequest) -> UserParts:
    """The turn's prompt: the text and media of the last (user) message."""
    return message_parts(request.messages[-1], len(request.messages) - 1)


def client_results(request: ChatRequest) -> list[ToolResultMessage] | None:
    """The trailing `tool` messages (a continuation), or None when the last is `user`."""
    results: list[ToolResultMessage] = []
    index = len(request.messages)
    while index and request.messages[index - 1].role == "tool":
        index -= 1
        message = request.messages[index]
        results.append(
            result_message(
                message.tool_call_id,
                message_text(message, index),
                where=f"messages[{index}].tool_call_id",
            )
        )
    return results[::-1] or None


def seed(request: ChatRequest) -> tuple[str | None, list[Message | UserParts]]:
    """What to record before the turn on a new session: a system note and earlier messages
    (user messages with media as `UserParts`, saved before they are recorded)."""
    system: list[str] = []
    history: list[Message | UserParts] = []
    for index, message in enumerate(request.messages[:-1]):
        parts = message_parts(message, index, media=message.role == "user")
        text = parts.text
        if message.role in ("system", "developer"):
            if text.strip():
                system.append(text.strip())
        elif message.role == "user":
            history.append(parts if parts.media else user_message(text))
        elif message.role == "assistant" and text:
            history.append(
                AssistantMessage(content=(TextBlock(text=text),), provider="client", model="client")
            )
    note = f"{SYSTEM_NOTE_INTRO}\n\n" + "\n\n".join(system) if system else None
    return note, history


class Completion:
    """Builds the response objects of one completion (shared id, model and timestamp)."""

    def __init__(self, model: str) -> None:
        """Start a response for the model name the client asked for."""
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.model = model
        self.created = int(time.time())

    def body(
        self,
        reply: str,
        finish_reason: str,
        usage: Usage,
        tool_calls: Sequence[ToolCallBlock] = (),
    ) -> dict[str, Any]:
        """A non-streamed `chat.completion` (with the client tool calls it stopped for)."""
        message: dict[str, Any] = {"role": "assistant", "content": reply, "refusal": None}
        if tool_calls:
            message["content"] = reply or None
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments_json(call)},
                }
                for call in tool_calls
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage_to_openai(usage),
        }

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        """One `chat.completion.chunk` with a single choice."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        """The final chunk of a stream with `include_usage`: no choices, only usage."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage_to_openai(usage),
        }


def finish_reason(stop_reason: str) -> str:
    """OpenAI's `finish_reason` for how a turn ended."""
    if stop_reason in ("content_filter", "refusal"):
        return "content_filter"
    if stop_reason == "tool_calls":
        return "tool_calls"
    return "length" if stop_reason in ("length", "max_steps") else "stop"
