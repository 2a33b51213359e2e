"""Nodmix requests ⇄ OpenAI chat-completions JSON (pure functions, no I/O).

Forward (`build_payload`) is what the adapter sends. Reverse (`request_from_payload`) is what
the scripted model server uses to hand an incoming request to the same `respond` function
that scripts the in-process model; it is not a perfect inverse (thinking is never sent, tool
result images travel in an extra user message) but it keeps everything a script looks at.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from nodmix.messages import (
    AssistantMessage,
    ImageBlock,
    ImageRefBlock,
    JsonObject,
    Message,
    ResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from nodmix.providers.arguments import parse_arguments
from nodmix.providers.base import ModelRequest, ModelSpec
from nodmix.tools.base import ToolSpec

TOOL_IMAGES_NOTE = "Images returned by the tool call(s) above:"


def token_limit_field(base_url: str) -> str:
    """`max_completion_tokens` for api.openai.com (it rejects `max_tokens` for newer models)."""
    host = urlsplit(base_url).hostname or ""
    return "max_completion_tokens" if host == "api.openai.com" else "max_tokens"


def build_payload(request: ModelRequest, *, base_url: str) -> JsonObject:
    """The streaming chat-completions body for `request`.

    `request.extra["openai"]` (a dict) is merged over the top level last, for vendor knobs
    such as `reasoning_effort` or `parallel_tool_calls`.
    """
    payload: JsonObject = {
        "model": request.model.id,
        "messages": to_openai_messages(request.system, request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        payload["tools"] = [tool_to_openai(tool) for tool in request.tools]
        if request.tool_choice == "required":
            payload["tool_choice"] = "required"
        elif request.tool_choice not in (None, "auto"):
            payload["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    if request.max_tokens is not None:
        payload[token_limit_field(base_url)] = request.max_tokens
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    extra = request.extra.get("openai")
    if isinstance(extra, Mapping):
        payload.update(extra)
    return payload


def payload_tool_names(payload: Mapping[str, Any]) -> list[str]:
    """Tool names in a chat-completions payload, in order."""
    tools = payload.get("tools") or []
    return [str(t.get("function", {}).get("name", "")) for t in tools if isinstance(t, dict)]


def tool_to_openai(tool: ToolSpec) -> JsonObject:
    """One function tool definition."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def to_openai_messages(system: str, messages: Sequence[Message]) -> list[JsonObject]:
    """The `messages` array: system prompt first, then the conversation."""
    out: list[JsonObject] = []
    if system:
        out.append({"role": "system", "content": system})
    pending_images: list[ImageBlock] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage) and pending_images:
            out.append(_tool_images_message(pending_images))
            pending_images = []
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message.content)})
        elif isinstance(message, AssistantMessage):
            converted = _assistant_message(message)
            if converted is not None:
                out.append(converted)
        else:
            out.append(_tool_message(message))
            pending_images.extend(b for b in message.content if isinstance(b, ImageBlock))
    if pending_images:
        out.append(_tool_images_message(pending_images))
    return out


def _block_text(block: UserBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text
    return block.note if isinstance(block, ImageRefBlock) else ""


def _image_part(block: ImageBlock) -> JsonObject:
    url = f"data:{block.mime_type};base64,{block.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(blocks: Sequence[UserBlock]) -> str | list[JsonObject]:
    # Plain strings for text-only turns: every OpenAI-compatible server accepts them, while
    # some local servers still choke on content-part arrays.
    if not any(isinstance(b, ImageBlock) for b in blocks):
        return "\n".join(_block_text(b) for b in blocks)
    parts: list[JsonObject] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageRefBlock):  # not resolved to pixels for this request
            parts.append({"type": "text", "text": block.note})
        else:
            parts.append(_image_part(block))
    return parts


def _assistant_message(message: AssistantMessage) -> JsonObject | None:
    # Thinking blocks are dropped: chat-completions has no field to send reasoning back.
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": _arguments_json(b.arguments)},
        }
        for b in message.content
        if isinstance(b, ToolCallBlock)
    ]
    if not text and not calls:
        return None  # an empty (aborted or failed) turn; servers reject empty assistants
    out: JsonObject = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


def _arguments_json(arguments: JsonObject) -> str:
    # Unparseable arguments go back as `{"_raw": ...}`, still valid JSON: some servers
    # (vLLM) re-parse history arguments and reject the request otherwise.
    return json.dumps(arguments, ensure_ascii=False)


def _tool_message(message: ToolResultMessage) -> JsonObject:
    text = "\n".join(t for t in map(_block_text, message.content) if t)
    if not text and any(isinstance(b, ImageBlock) for b in message.content):
        text = "(image attached below)"
    return {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}


def _tool_images_message(images: Iterable[ImageBlock]) -> JsonObject:
    # Tool messages cannot carry images in chat-completions; a user turn right after can.
    parts: list[JsonObject] = [{"type": "text", "text": TOOL_IMAGES_NOTE}]
    parts.extend(_image_part(image) for image in images)
    return {"role": "user", "content": parts}


# ---- reverse: OpenAI JSON -> Nodmix (used by the scripted model server) -------------------------


def request_from_payload(payload: Mapping[str, Any], *, provider: str = "scripted") -> ModelRequest:
    """Map an incoming chat-completions body back to a `ModelRequest`.

    Raises:
        ValueError: The body is not a chat-completions request (the server answers 400).
    """
    model = payload.get("model")
    raw_messages = payload.get("messages")
    if not isinstance(model, str) or not isinstance(raw_messages, list):
        raise ValueError("body needs a string 'model' and a 'messages' array")
    system: list[str] = []
    messages: list[Message] = []
    names: dict[str, str] = {}
    for raw in raw_messages:
        if not isinstance(raw, dict):
            raise ValueError("every message must be an object")
        role = raw.get("role")
        if role in ("system", "developer"):
            system.append(_plain_text(raw.get("content")))
        elif role == "user":
            messages.append(UserMessage(content=tuple(_user_blocks(raw.get("content")))))
        elif role == "assistant":
            assistant = _assistant_from_openai(raw)
            names.update((call.id, call.name) for call in assistant.tool_calls)
            messages.append(assistant)
        elif role == "tool":
            call_id = str(raw.get("tool_call_id", ""))
            content: tuple[ResultBlock, ...] = (TextBlock(text=_plain_text(raw.get("content"))),)
            messages.append(
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name=names.get(call_id, ""),
                    content=content,
                    is_error=False,
                )
            )
        else:
            raise ValueError(f"unknown message role {role!r}")
    limit = payload.get("max_completion_tokens", payload.get("max_tokens"))
    temperature = payload.get("temperature")
    choice = payload.get("tool_choice")
    if isinstance(choice, dict):
        choice = str(choice.get("function", {}).get("name", "")) or None
    return ModelRequest(
        model=ModelSpec(provider=provider, id=model),
        system="\n\n".join(part for part in system if part),
        messages=messages,
        tools=[_tool_from_openai(t) for t in payload.get("tools") or []],
        max_tokens=limit if isinstance(limit, int) else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        tool_choice=choice if isinstance(choice, str) else None,
    )


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _user_blocks(content: Any) -> list[UserBlock]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[UserBlock] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            blocks.append(TextBlock(text=str(part.get("text", ""))))
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            head, _, data = url.partition(";base64,")
            if head.startswith("data:") and data:
                blocks.append(ImageBlock(data=data, mime_type=head[len("data:") :]))
            else:
                blocks.append(TextBlock(text=f"[image: {url}]"))
    return blocks


def _assistant_from_openai(raw: Mapping[str, Any]) -> AssistantMessage:
    blocks: list[TextBlock | ThinkingBlock | ToolCallBlock] = []
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(ThinkingBlock(thinking=reasoning))
    text = _plain_text(raw.get("content"))
    if text:
        blocks.append(TextBlock(text=text))
    for call in raw.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        blocks.append(
            ToolCallBlock(
                id=str(call.get("id", "")),
                name=str(function.get("name", "")),
                arguments=arguments
                if isinstance(arguments, dict)
                else parse_arguments(str(arguments)),
            )
        )
    return AssistantMessage(content=tuple(blocks), api="openai-completions")


def _tool_from_openai(raw: Mapping[str, Any]) -> ToolSpec:
    function = raw.get("function") or {}
    return ToolSpec(
        name=str(function.get("name", "")),
        description=str(function.get("description", "")),
        parameters=function.get("parameters") or {"type": "object", "properties": {}},
    )
