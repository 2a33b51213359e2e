"""MCP wire objects → Nodmix values: tool results, definitions and JSON-safe dicts.

This is the only module that knows the shapes of MCP content items. Everything it returns is
either one of our message blocks or plain JSON (camelCase keys, as on the wire), so code mode can
hand it to the sandbox unchanged.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import mcp_types as types
from pydantic import BaseModel

from nodmix.messages import ImageBlock, JsonObject, ResultBlock, TextBlock
from nodmix.tools.base import ToolResult

# Result fields that describe the protocol exchange (caching, pagination, result kind), not the
# answer; they are dropped so callers see the same shape on every protocol version.
_ENVELOPE_KEYS = frozenset({"_meta", "ttlMs", "cacheScope", "resultType", "nextCursor"})


def to_json(model: BaseModel) -> JsonObject:
    """Dump an MCP model as wire JSON (aliases, no unset optional fields)."""
    data: JsonObject = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def result_json(model: BaseModel) -> JsonObject:
    """Dump an MCP result without its protocol envelope fields."""
    return {k: v for k, v in to_json(model).items() if k not in _ENVELOPE_KEYS}


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _size_note(data: str) -> str:
    size = _decoded_size(data)
    return f"{size} bytes" if size is not None else "undecodable base64"


def _resource_block(
    resource: types.TextResourceContents | types.BlobResourceContents,
) -> ResultBlock:
    mime = resource.mime_type or "unknown type"
    if isinstance(resource, types.TextResourceContents):
        return TextBlock(text=f"[resource {resource.uri} ({mime})]\n{resource.text}")
    if resource.mime_type and resource.mime_type.startswith("image/"):
        return ImageBlock(data=resource.blob, mime_type=resource.mime_type)
    return TextBlock(text=f"[resource {resource.uri} ({mime}): {_size_note(resource.blob)}]")


def content_block(item: types.ContentBlock) -> ResultBlock:
    """Turn one MCP content item into what the model sees.

    Text stays text and images stay images. Audio, resource links and binary resources become a
    one-line description, because our providers cannot take them as input; the raw item is kept
    in the result details for UIs and code mode.
    """
    if isinstance(item, types.TextContent):
        return TextBlock(text=item.text)
    if isinstance(item, types.ImageContent):
        return ImageBlock(data=item.data, mime_type=item.mime_type)
    if isinstance(item, types.AudioContent):
        return TextBlock(text=f"[audio ({item.mime_type}): {_size_note(item.data)}]")
    if isinstance(item, types.ResourceLink):
        about = f" - {item.description}" if item.description else ""
        mime = f" ({item.mime_type})" if item.mime_type else ""
        return TextBlock(text=f"[resource link: {item.name} <{item.uri}>{mime}{about}]")
    return _resource_block(item.resource)


def tool_result(result: types.CallToolResult) -> ToolResult:
    """Convert a `tools/call` result, keeping `content`, `structuredContent` and `isError`."""
    blocks = tuple(content_block(item) for item in result.content)
    if not blocks and result.structured_content is not None:
        # The spec asks servers to mirror structured output as text, but not all do; the model
        # must still see the answer.
        blocks = (TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)),)
    if not blocks:
        blocks = (TextBlock(text="(the tool returned no content)"),)
    details: JsonObject = {"content": [to_json(item) for item in result.content]}
    if result.structured_content is not None:
        details["structuredContent"] = result.structured_content
    details["isError"] = bool(result.is_error)
    return ToolResult(content=blocks, details=details, is_error=bool(result.is_error))


def error_result(message: str, *, code: int | None = None) -> ToolResult:
    """An error result shaped like an MCP one, for failures that never reached the tool."""
    details: JsonObject = {"content": [{"type": "text", "text": message}], "isError": True}
    if code is not None:
        details["error"] = {"code": code, "message": message}
    return ToolResult.error(message, details=details)


def listed(items: Sequence[BaseModel]) -> list[JsonObject]:
    """Dump a page-merged list of MCP listing entries (resources, prompts, templates)."""
    return [to_json(item) for item in items]


def tool_title(tool: types.Tool) -> str | None:
    """The display title, by the spec's precedence: `title`, then `annotations.title`."""
    if tool.title:
        return tool.title
    if tool.annotations is not None and tool.annotations.title:
        return tool.annotations.title
    return None


def input_schema(tool: types.Tool) -> dict[str, Any]:
    """The tool's argument schema, guaranteed to be an object schema."""
    schema = dict(tool.input_schema)
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


_PAGE_CAP = 100
"""Most pages read from one listing; a server whose cursor never ends cannot hang a run."""


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


P = TypeVar("P", bound=_Page)
X = TypeVar("X")


async def all_pages(
    fetch: Callable[[str | None], Awaitable[P]], items: Callable[[P], Sequence[X]]
) -> list[X]:
    """Follow a paginated MCP listing to its end (at most 100 pages)."""
    out: list[X] = []
    cursor: str | None = None
    for _ in range(_PAGE_CAP):
        page = await fetch(cursor)
        out.extend(items(page))
        cursor = page.next_cursor
        if cursor is None:
            break
    return out
