"""Nodmix requests ⇄ Anthropic Messages JSON (pure functions, no I/O).

Differences from chat-completions that shape this module:

- The system prompt is a top-level field, not a message.
- Roles must alternate, and tool results are `tool_result` blocks inside a *user* message, so
  consecutive tool results (and a user message right after them) merge into one user turn.
- Thinking blocks go back with their signature, but only to Anthropic itself: a signature
  is meaningless to (and rejected for) anything else, and unsigned thinking is dropped.
- Tool-use ids must match `[A-Za-z0-9_-]+`; ids minted by other providers are sanitised the
  same way on the call and on its result, so pairs still match.

The reverse direction (`request_from_payload`) serves the scripted model server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from nodmix.messages import (
    AssistantBlock,
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
from nodmix.providers.base import ModelRequest, ModelSpec
from nodmix.tools.base import ToolSpec

API = "anthropic-messages"
_CACHE = {"type": "ephemeral"}
_CACHEABLE = frozenset({"text", "image", "tool_result"})
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def tool_use_id(call_id: str) -> str:
    """A tool-use id Anthropic accepts, derived deterministically from any provider's id."""
    return _BAD_ID_CHARS.sub("_", call_id)[:64] or "toolu_unknown"


def build_payload(request: ModelRequest) -> JsonObject:
    """The streaming Messages body for `request`.

    `max_tokens` is required by the API: the request's value, else the model's limit. Prompt
    caching marks the system prompt and the newest turn as cache breakpoints (turn it off
    with `extra={"anthropic": {"prompt_cache": False}}`). Other keys of
    `request.extra["anthropic"]` (e.g. `{"thinking": {...}}`) are merged over the payload last.
    """
    vendor = request.extra.get("anthropic")
    extra: JsonObject = dict(vendor) if isinstance(vendor, Mapping) else {}
    # `prompt_cache: false` is our knob, not the API's: some Anthropic-compatible servers
    # reject `cache_control`.
    cache = extra.pop("prompt_cache", True) is not False
    messages = to_anthropic_messages(request.messages)
    if cache:
        _mark_cache_breakpoint(messages)
    payload: JsonObject = {
        "model": request.model.id,
        "max_tokens": request.max_tokens or request.model.max_tokens,
        "messages": messages,
        "stream": True,
    }
    if request.system:
        system: JsonObject = {"type": "text", "text": request.system}
        if cache:
            system["cache_control"] = _CACHE
        payload["system"] = [system]
    if request.tools:
        payload["tools"] = [tool_to_anthropic(tool) for tool in request.tools]
        if request.tool_choice == "required":
            payload["tool_choice"] = {"type": "any"}
        elif request.tool_choice not in (None, "auto"):
            payload["tool_choice"] = {"type": "tool", "name": request.tool_choice}
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    payload.update(extra)
    return payload


def payload_tool_names(payload: Mapping[str, Any]) -> list[str]:
    """Tool names in a Messages payload, in order."""
    return [str(t.get("name", "")) for t in payload.get("tools") or [] if isinstance(t, dict)]


def tool_to_anthropic(tool: ToolSpec) -> JsonObject:
    """One tool definition."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def to_anthropic_messages(messages: Sequence[Message]) -> list[JsonObject]:
    """The `messages` array, with same-role neighbours merged into one turn."""
    out: list[JsonObject] = []
    for message in messages:
        if isinstance(message, UserMessage):
            role, blocks = "user", [_user_block(b) for b in message.content if _non_empty(b)]
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        else:
            role, blocks = "user", [_tool_result_block(message)]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _non_empty(block: UserBlock) -> bool:
    return not isinstance(block, TextBlock) or bool(block.text)  # the API rejects empty text


def _user_block(block: UserBlock | ResultBlock) -> JsonObject:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageRefBlock):  # not resolved to pixels for this request
        return {"type": "text", "text": block.note}
    source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
    return {"type": "image", "source": source}


def _assistant_blocks(message: AssistantMessage) -> list[JsonObject]:
    own = message.api in ("", API)
    blocks: list[JsonObject] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            if own and block.thinking_signature:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": block.thinking,
                        "signature": block.thinking_signature,
                    }
                )
        elif isinstance(block, TextBlock):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": tool_use_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
    return blocks


def _tool_result_block(message: ToolResultMessage) -> JsonObject:
    block: JsonObject = {"type": "tool_result", "tool_use_id": tool_use_id(message.tool_call_id)}
    if any(isinstance(b, ImageBlock) for b in message.content):
        block["content"] = [_user_block(b) for b in message.content if _non_empty(b)]
    else:
        block["content"] = message.text
    if message.is_error:
        block["is_error"] = True
    return block


def _mark_cache_breakpoint(messages: list[JsonObject]) -> None:
    # Caching the newest turn lets the next request (same prefix plus one turn) hit the cache.
    if not messages:
        return
    last = messages[-1]["content"][-1]
    if last.get("type") in _CACHEABLE:
        messages[-1]["content"][-1] = {**last, "cache_control": _CACHE}


# ---- reverse: Anthropic JSON -> Nodmix (used by the scripted model server) ----------------------


def request_from_payload(payload: Mapping[str, Any], *, provider: str = "scripted") -> ModelRequest:
    """Map an incoming Messages body back to a `ModelRequest`.

    Raises:
        ValueError: The body is not a Messages request (the server answers 400).
    """
    model = payload.get("model")
    raw_messages = payload.get("messages")
    if not isinstance(model, str) or not isinstance(raw_messages, list):
        raise ValueError("body needs a string 'model' and a 'messages' array")
    messages: list[Message] = []
    names: dict[str, str] = {}
    for raw in raw_messages:
        if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant"):
            raise ValueError("every message must be an object with role user or assistant")
        blocks = _content_blocks(raw.get("content"))
        if raw["role"] == "assistant":
            assistant = AssistantMessage(content=tuple(_assistant_from(blocks)), api=API)
            names.update((call.id, call.name) for call in assistant.tool_calls)
            messages.append(assistant)
        else:
            messages.extend(_user_from(blocks, names))
    max_tokens = payload.get("max_tokens")
    temperature = payload.get("temperature")
    return ModelRequest(
        model=ModelSpec(provider=provider, id=model),
        system=_system_text(payload.get("system")),
        messages=messages,
        tools=[
            ToolSpec(
                name=str(t.get("name", "")),
                description=str(t.get("description", "")),
                parameters=t.get("input_schema") or {"type": "object", "properties": {}},
            )
            for t in payload.get("tools") or []
            if isinstance(t, dict)
        ],
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
    )


def _content_blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(str(b.get("text", "")) for b in _content_blocks(system))


def _image_from(block: Mapping[str, Any]) -> UserBlock:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return ImageBlock(data=str(source.get("data", "")), mime_type=str(source.get("media_type")))
    return TextBlock(text=f"[image: {source.get('url', '')}]")


def _user_from(blocks: list[Mapping[str, Any]], names: Mapping[str, str]) -> list[Message]:
    out: list[Message] = []
    loose: list[UserBlock] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            call_id = str(block.get("tool_use_id", ""))
            content: list[ResultBlock] = []
            for inner in _content_blocks(block.get("content")):
                if inner.get("type") == "image":
                    content.append(_image_from(inner))
                elif inner.get("type") == "text":
                    content.append(TextBlock(text=str(inner.get("text", ""))))
            out.append(
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name=names.get(call_id, ""),
                    content=tuple(content),
                    is_error=bool(block.get("is_error", False)),
                )
            )
        elif kind == "text":
            loose.append(TextBlock(text=str(block.get("text", ""))))
        elif kind == "image":
            loose.append(_image_from(block))
    if loose:
        out.append(UserMessage(content=tuple(loose)))
    return out


def _assistant_from(blocks: list[Mapping[str, Any]]) -> list[AssistantBlock]:
    out: list[AssistantBlock] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            out.append(TextBlock(text=str(block.get("text", ""))))
        elif kind == "thinking":
            out.append(
                ThinkingBlock(
                    thinking=str(block.get("thinking", "")),
                    thinking_signature=block.get("signature") or None,
                )
            )
        elif kind == "tool_use":
            arguments = block.get("input")
            out.append(
                ToolCallBlock(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    arguments=arguments if isinstance(arguments, dict) else {},
                )
            )
    return out
