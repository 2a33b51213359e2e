"""Real third-party servers over stdio, shared by the module: tools, resources and prompts."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp_support import tool_context

from nodmix.errors import MCPError
from nodmix.mcp import MCPManager, MCPTool
from nodmix.messages import ImageBlock
from nodmix.tools.base import Tool

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def _tools(manager: MCPManager) -> dict[str, MCPTool]:
    return {tool.spec.name: tool for tool in await manager.list_tools()}


async def test_time_server_tools_have_direct_mode_names_and_the_server_schema(
    shared_manager: MCPManager,
) -> None:
    tools = await _tools(shared_manager)
    tool = tools["time__get_current_time"]
    assert isinstance(tool, Tool)
    assert tool.origin.id == "mcp:time:get_current_time"
    assert tool.spec.description == "Get current time in a specific timezone"
    assert tool.spec.parameters["type"] == "object"
    assert tool.spec.parameters["required"] == ["timezone"]
    assert "time__convert_time" in tools


async def test_get_current_time_returns_structured_and_text_content(
    shared_manager: MCPManager, tmp_path: Path
) -> None:
    tool = (await _tools(shared_manager))["time__get_current_time"]
    result = await tool.call({"timezone": "Asia/Tokyo"}, tool_context(tmp_path))
    assert result.is_error is False
    structured = result.details["structuredContent"]
    assert structured["timezone"] == "Asia/Tokyo"
    assert structured["datetime"].endswith("+09:00")
    assert json.loads(result.text_content) == structured
    assert result.details["isError"] is False


async def test_a_tool_error_from_the_server_stays_an_error_result(
    shared_manager: MCPManager,
) -> None:
    result = await shared_manager.call_tool("time", "get_current_time", {"timezone": "Mars/Base"})
    assert result.is_error is True
    assert result.details["isError"] is True
    assert "Mars/Base" in result.text_content


async def test_unknown_tool_is_an_error_result_not_an_exception(
    shared_manager: MCPManager,
) -> None:
    result = await shared_manager.call_tool("time", "no_such_tool", {})
    assert result.is_error is True
    assert result.text_content.startswith("MCP server 'time' rejected tools/call 'no_such_tool'")


async def test_everything_echo_and_sum_work_over_stdio(shared_manager: MCPManager) -> None:
    echo = await shared_manager.call_tool("everything", "echo", {"message": "hello"})
    total = await shared_manager.call_tool("everything", "get-sum", {"a": 2, "b": 40})
    assert echo.text_content == "Echo: hello"
    assert total.text_content == "The sum of 2 and 40 is 42."


async def test_image_content_reaches_the_model_as_an_image_block(
    shared_manager: MCPManager,
) -> None:
    result = await shared_manager.call_tool("everything", "get-tiny-image", {})
    images = [b for b in result.content if isinstance(b, ImageBlock)]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"
    assert {item["type"] for item in result.details["content"]} >= {"text", "image"}


async def test_definition_exposes_title_annotations_and_output_schema(
    shared_manager: MCPManager,
) -> None:
    tool = (await _tools(shared_manager))["everything__get-structured-content"]
    definition = tool.definition
    assert definition.title == "Get Structured Content Tool"
    assert tool.spec.label == "Get Structured Content Tool"
    assert definition.annotations is not None and definition.annotations["readOnlyHint"] is True
    assert definition.output_schema is not None
    assert set(definition.output_schema["properties"]) == {"temperature", "conditions", "humidity"}
    result = await tool.call({"location": "Chicago"}, tool_context(Path(".")))
    assert set(result.details["structuredContent"]) == {"temperature", "conditions", "humidity"}


async def test_resources_are_listed_and_read(shared_manager: MCPManager) -> None:
    resources = await shared_manager.list_resources("everything")
    uris = {r["uri"] for r in resources}
    assert "demo://resource/static/document/architecture.md" in uris
    templates = await shared_manager.list_resource_templates("everything")
    assert {t["uriTemplate"] for t in templates} >= {"demo://resource/dynamic/text/{resourceId}"}
    read = await shared_manager.read_resource("everything", "demo://resource/dynamic/text/7")
    (content,) = read["contents"]
    assert content["uri"] == "demo://resource/dynamic/text/7"
    assert content["text"].startswith("Resource 7:")


async def test_prompts_are_listed_and_rendered_with_arguments(shared_manager: MCPManager) -> None:
    prompts = {p["name"]: p for p in await shared_manager.list_prompts("everything")}
    assert {a["name"] for a in prompts["args-prompt"]["arguments"]} == {"city", "state"}
    rendered = await shared_manager.get_prompt(
        "everything", "args-prompt", {"city": "Lyon", "state": "ARA"}
    )
    (message,) = rendered["messages"]
    assert message == {
        "role": "user",
        "content": {"type": "text", "text": "What's weather in Lyon, ARA?"},
    }


async def test_reading_an_unknown_resource_raises_a_one_line_mcp_error(
    shared_manager: MCPManager,
) -> None:
    with pytest.raises(MCPError) as caught:
        await shared_manager.read_resource("everything", "demo://resource/dynamic/text/0")
    assert str(caught.value).startswith("MCP server 'everything' rejected resources/read")
    assert "\n" not in str(caught.value)


async def test_server_info_reports_what_each_server_offers(shared_manager: MCPManager) -> None:
    everything = await shared_manager.server_info("everything")
    time = await shared_manager.server_info("time")
    assert (everything.tools, everything.resources, everything.prompts) == (True, True, True)
    assert time.tools is True
    assert time.server_name == "mcp-time"
    assert await shared_manager.list_prompts("time") == []


async def test_concurrent_runs_share_one_server_process(shared_manager: MCPManager) -> None:
    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(shared_manager.call_tool, "everything", "echo", {"message": str(n)})
            tg.start_soon(shared_manager.list_tools)
    starts = {s.name: s.starts for s in shared_manager.status()}
    assert starts == {"time": 1, "everything": 1}
    assert shared_manager.failures == {}


async def test_tool_policy_can_deny_a_whole_server_or_single_tools(
    shared_manager: MCPManager,
) -> None:
    from nodmix.tools.policy import ToolPolicy

    tools = await shared_manager.list_tools()
    by_server = ToolPolicy(deny=["time"]).filter(tools)
    assert {t.origin.owner for t in by_server} == {"everything"}
    by_id = ToolPolicy(deny=["mcp:everything:echo", "time__convert_time"]).filter(tools)
    names = {t.spec.name for t in by_id}
    assert "everything__echo" not in names and "time__convert_time" not in names
    assert {"everything__get-sum", "time__get_current_time"} <= names
