"""MCP results and definitions → Nodmix values (pure conversions, no server needed)."""

from __future__ import annotations

import base64

import mcp_types as types

from nodmix.mcp.results import content_block, error_result, tool_result
from nodmix.mcp.tool import MCPToolDefinition
from nodmix.messages import ImageBlock, TextBlock

PNG = base64.b64encode(b"\x89PNG fake").decode()


def test_text_and_image_items_keep_their_kind() -> None:
    assert content_block(types.TextContent(text="hi")) == TextBlock(text="hi")
    image = content_block(types.ImageContent(data=PNG, mime_type="image/png"))
    assert image == ImageBlock(data=PNG, mime_type="image/png")


def test_audio_and_resource_links_are_described_as_text() -> None:
    audio = content_block(types.AudioContent(data=PNG, mime_type="audio/wav"))
    assert audio == TextBlock(text="[audio (audio/wav): 9 bytes]")
    link = content_block(
        types.ResourceLink(
            name="readme", uri="file:///r.md", mime_type="text/markdown", description="Docs"
        )
    )
    assert link == TextBlock(text="[resource link: readme <file:///r.md> (text/markdown) - Docs]")


def test_embedded_resources_show_text_images_and_binary_sizes() -> None:
    text = types.EmbeddedResource(
        resource=types.TextResourceContents(uri="memo://a", mime_type="text/plain", text="body")
    )
    assert content_block(text) == TextBlock(text="[resource memo://a (text/plain)]\nbody")
    picture = types.EmbeddedResource(
        resource=types.BlobResourceContents(uri="memo://p", mime_type="image/png", blob=PNG)
    )
    assert content_block(picture) == ImageBlock(data=PNG, mime_type="image/png")
    archive = types.EmbeddedResource(
        resource=types.BlobResourceContents(uri="memo://z", mime_type="application/gzip", blob=PNG)
    )
    assert content_block(archive) == TextBlock(
        text="[resource memo://z (application/gzip): 9 bytes]"
    )


def test_result_details_keep_content_structured_content_and_is_error() -> None:
    result = tool_result(
        types.CallToolResult(
            content=[types.TextContent(text="22 C")],
            structured_content={"temperature": 22},
            is_error=False,
        )
    )
    assert result.content == (TextBlock(text="22 C"),)
    assert result.details == {
        "content": [{"type": "text", "text": "22 C"}],
        "structuredContent": {"temperature": 22},
        "isError": False,
    }
    assert result.is_error is False


def test_structured_only_result_is_shown_to_the_model_as_json() -> None:
    result = tool_result(types.CallToolResult(content=[], structured_content={"ok": True}))
    assert result.text_content == '{"ok": true}'
    assert result.details["content"] == []


def test_server_error_result_stays_an_error() -> None:
    result = tool_result(
        types.CallToolResult(content=[types.TextContent(text="bad zone")], is_error=True)
    )
    assert result.is_error is True
    assert result.details["isError"] is True
    assert result.text_content == "bad zone"


def test_transport_failures_are_shaped_like_mcp_error_results() -> None:
    result = error_result("MCP server 'x' failed to start: boom")
    assert result.is_error is True
    assert result.details == {
        "content": [{"type": "text", "text": "MCP server 'x' failed to start: boom"}],
        "isError": True,
    }


def test_definition_keeps_title_annotations_and_output_schema() -> None:
    tool = types.Tool(
        name="weather",
        description=" Current weather ",
        input_schema={"properties": {"city": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"c": {"type": "number"}}},
        annotations=types.ToolAnnotations(title="Weather", read_only_hint=True),
    )
    definition = MCPToolDefinition.from_mcp("wx", tool)
    assert definition.title == "Weather"
    assert definition.description == "Current weather"
    assert definition.input_schema == {"type": "object", "properties": {"city": {"type": "string"}}}
    assert definition.output_schema == {"type": "object", "properties": {"c": {"type": "number"}}}
    assert definition.annotations == {"title": "Weather", "readOnlyHint": True}
    assert definition.raw["name"] == "weather"
    assert definition.raw["outputSchema"] == definition.output_schema
