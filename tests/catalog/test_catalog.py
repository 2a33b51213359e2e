"""The run-scoped catalog: ids, order, lookup, safe names, telemetry."""

from __future__ import annotations

import pytest

from nodmix.catalog import CatalogLookupError, RunCatalog, collation_key
from nodmix.tools import FunctionTool, ToolContext, ToolResult, ToolSource


async def _noop(args: dict[str, object], ctx: ToolContext) -> ToolResult:
    return ToolResult.text("ok")


def _tool(
    name: str, owner: str = "core", source: ToolSource = "nodmix", desc: str = ""
) -> FunctionTool:
    return FunctionTool.create(
        _noop, name=name, description=desc or f"The {name} tool.", owner=owner, source=source
    )


def test_entries_list_core_bundled_external_mcp_then_client_tools_by_id_within_each() -> None:
    catalog = RunCatalog.build(
        [
            _tool("pick", owner="app", source="client"),
            _tool("weather", owner="acme"),
            _tool("write"),
            _tool("time__now", owner="time", source="mcp"),
            _tool("read"),
            _tool("note_add", owner="notes"),
            _tool("skills_list", owner="skills"),
            _tool("alpha", owner="aardvark"),
        ],
        external_owners=frozenset({"acme", "aardvark"}),
    )
    assert [e.id for e in catalog.entries] == [
        "nodmix:core:read",
        "nodmix:core:write",
        "nodmix:notes:note_add",
        "nodmix:skills:skills_list",
        "nodmix:aardvark:alpha",
        "nodmix:acme:weather",
        "mcp:time:time__now",
        "client:app:pick",
    ]
    assert [e.id for e in catalog.visible][-1] == "client:app:pick"


def test_search_ties_and_an_empty_query_keep_id_order_whatever_the_listing_groups() -> None:
    tools = [
        _tool("pick", owner="app", source="client", desc="Same words."),
        _tool("write", desc="Same words."),
        _tool("weather", owner="acme", desc="Same words."),
    ]
    catalog = RunCatalog.build(tools, external_owners=frozenset({"acme"}))
    expected = ["client:app:pick", "nodmix:acme:weather", "nodmix:core:write"]
    assert [e.id for e in catalog.search("same words", 10)] == expected
    assert [e.id for e in catalog.search("", 10)] == expected


def test_collation_matches_locale_order_for_punctuation_digits_and_case() -> None:
    ids = [
        "nodmix:p10:x",
        "nodmix:P1:dup",
        "nodmix:p1:x",
        "nodmix:core:Read",
        "nodmix:p1-dup",
        "nodmix:core:read",
        "nodmix:p1:dup",
        "nodmix:p1_dup",
    ]
    assert sorted(ids, key=collation_key) == [
        "nodmix:core:read",
        "nodmix:core:Read",
        "nodmix:p1_dup",
        "nodmix:p1-dup",
        "nodmix:p1:dup",
        "nodmix:P1:dup",
        "nodmix:p1:x",
        "nodmix:p10:x",
    ]


def test_control_tools_are_never_cataloged() -> None:
    catalog = RunCatalog.build(
        [
            _tool("exec"),
            _tool("exec", owner="codemode"),
            _tool("wait", owner="codemode"),
            _tool("tool_search"),
            _tool("tool_call"),
        ]
    )
    assert [e.id for e in catalog.entries] == ["nodmix:core:exec"]


def test_mcp_entries_are_cataloged_but_hidden_from_guest_views() -> None:
    catalog = RunCatalog.build([_tool("read"), _tool("time__now", owner="time", source="mcp")])
    assert [e.id for e in catalog.visible] == ["nodmix:core:read"]
    assert catalog.by_id("mcp:time:time__now") is not None
    with pytest.raises(CatalogLookupError):
        catalog.find("mcp:time:time__now")
    assert catalog.telemetry()["sources"] == {"nodmix": 1, "mcp": 1, "client": 0}


def test_find_prefers_exact_id_then_unique_name() -> None:
    catalog = RunCatalog.build([_tool("read"), _tool("dup", owner="a"), _tool("dup", owner="b")])
    assert catalog.find(" nodmix:core:read ").name == "read"
    assert catalog.find("read").id == "nodmix:core:read"
    with pytest.raises(CatalogLookupError, match="Ambiguous"):
        catalog.find("dup")
    with pytest.raises(CatalogLookupError, match="Unknown tool id"):
        catalog.find("nope")


def test_safe_names_skip_collisions_non_identifiers_and_helper_names() -> None:
    catalog = RunCatalog.build(
        [
            _tool("read"),
            _tool("web-fetch"),
            _tool("search"),
            _tool("dup", owner="a"),
            _tool("dup", owner="b"),
            _tool("time__now", owner="time", source="mcp"),
        ]
    )
    assert sorted(catalog.safe_names()) == ["read"]


def test_compact_entries_have_no_schema_and_describe_adds_it() -> None:
    (entry,) = RunCatalog.build([_tool("read", desc="Read a file")]).entries
    assert entry.compact() == {
        "id": "nodmix:core:read",
        "name": "read",
        "description": "Read a file",
        "source": "nodmix",
        "sourceName": "core",
    }
    assert entry.with_schema()["parameters"] == {"type": "object", "properties": {}}
