"""`tools.search` ranking."""

from __future__ import annotations

from nodmix.catalog import RunCatalog, substring_rank, tokenize
from nodmix.tools import FunctionTool, ToolContext, ToolResult


async def _noop(args: dict[str, object], ctx: ToolContext) -> ToolResult:
    return ToolResult.text("ok")


def _catalog(*tools: tuple[str, str]) -> RunCatalog:
    return RunCatalog.build(
        FunctionTool.create(_noop, name=name, description=desc) for name, desc in tools
    )


CORE = (
    ("read", "Read a text file from the workspace."),
    ("write", "Write a file in the workspace, replacing it."),
    ("edit", "Replace exact text in a file."),
    ("exec", "Run a shell command in the workspace."),
    ("web_fetch", "Fetch a web page and return its readable text."),
)


def test_tokenize_splits_case_styles_stems_and_drops_stop_words() -> None:
    assert tokenize("getCurrentTime") == ["get", "current", "time"]
    assert tokenize("list_files") == ["list", "file"]
    assert tokenize("read the files", drop_stop_words=True) == ["read", "file"]


def test_read_file_query_finds_read_first() -> None:
    ranked = [e.name for e in _catalog(*CORE).search("read file", 5)]
    assert ranked[0] == "read"


def test_exact_name_beats_description_mentions() -> None:
    catalog = _catalog(
        ("fetch_logs", "Fetch logs; unlike web_fetch it reads the local journal and fetches more."),
        ("web_fetch", "Download a URL."),
    )
    assert catalog.search("web_fetch", 2)[0].name == "web_fetch"
    assert catalog.search("web fetch", 2)[0].name == "web_fetch"


def test_whole_words_beat_substrings() -> None:
    catalog = _catalog(("spreadsheet", "Edit spreadsheets."), ("read", "Read a file."))
    assert catalog.search("read", 2)[0].name == "read"
    assert [e.name for e in catalog.search("read", 5)] == ["read"]


def test_prefix_of_a_word_still_matches() -> None:
    catalog = _catalog(("calendar_list", "List calendar events."), ("read", "Read a file."))
    assert [e.name for e in catalog.search("calend", 5)] == ["calendar_list"]


def test_empty_query_returns_catalog_order_and_limit_applies() -> None:
    catalog = _catalog(*CORE)
    assert [e.name for e in catalog.search("  ", 3)] == ["edit", "exec", "read"]


def test_ties_are_broken_deterministically_by_catalog_order() -> None:
    catalog = _catalog(("b_tool", "Does things."), ("a_tool", "Does things."))
    assert [e.name for e in catalog.search("things", 5)] == ["a_tool", "b_tool"]


def test_substring_baseline_reproduces_reference_scores() -> None:
    entries = [
        ("nodmix:core:read", "read", "nodmix:core:read", "read", "Read a file from the workspace"),
        ("nodmix:core:write", "write", "nodmix:core:write", None, "Write a file"),
    ]
    assert substring_rank(entries, "read file") == ["nodmix:core:read", "nodmix:core:write"]
