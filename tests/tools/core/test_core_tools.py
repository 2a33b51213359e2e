from __future__ import annotations

from jsonschema import validators  # type: ignore[import-untyped,unused-ignore]

from nodmix.config.schema import ExecToolConfig, ToolsConfig
from nodmix.tools.base import Tool
from nodmix.tools.core import core_tools


def test_core_tools_are_the_five_builtins_with_catalog_ids() -> None:
    tools = core_tools(None)
    assert [tool.origin.id for tool in tools] == [
        "nodmix:core:exec",
        "nodmix:core:read",
        "nodmix:core:write",
        "nodmix:core:edit",
        "nodmix:core:web_fetch",
    ]
    assert all(isinstance(tool, Tool) for tool in tools)
    assert [tool.spec.name for tool in tools] == [tool.origin.name for tool in tools]


def test_every_core_tool_schema_is_a_closed_object_with_described_properties() -> None:
    for tool in core_tools(None):
        schema = tool.spec.parameters
        validators.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{tool.spec.name}.{name} has no description"


def test_unset_or_non_positive_settings_fall_back_to_defaults() -> None:
    config = ToolsConfig(exec=ExecToolConfig(timeout_seconds=0))
    exec_tool = core_tools(config)[0]
    assert "(default 120)" in exec_tool.spec.description
