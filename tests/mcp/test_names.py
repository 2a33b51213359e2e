"""Direct-mode tool names: sanitising, length limits and collision suffixes."""

from __future__ import annotations

import re

from nodmix.mcp.names import (
    MAX_NAME_CHARS,
    MAX_SERVER_CHARS,
    ToolNamer,
    assign_server_names,
    sanitize_fragment,
)

SAFE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def test_tool_name_joins_server_and_tool_with_a_double_underscore() -> None:
    part = assign_server_names(["time"])["time"]
    assert ToolNamer().name(part, "get_current_time") == "time__get_current_time"


def test_characters_outside_the_safe_set_become_dashes() -> None:
    assert sanitize_fragment("my.server v2/beta", "mcp") == "my-server-v2-beta"
    assert sanitize_fragment("  padded  ", "tool") == "padded"
    assert sanitize_fragment("ünïcode", "tool") == "tool--n-code"


def test_fragment_not_starting_with_a_letter_gets_the_prefix_word() -> None:
    assert sanitize_fragment("1password", "mcp") == "mcp-1password"
    assert sanitize_fragment("2fa", "tool") == "tool-2fa"
    assert sanitize_fragment("_private", "tool") == "tool-_private"
    assert sanitize_fragment("", "mcp") == "mcp"
    assert sanitize_fragment("...", "tool") == "tool----"


def test_server_part_is_cut_to_30_characters() -> None:
    part = assign_server_names(["s" * 50])["s" * 50]
    assert part == "s" * MAX_SERVER_CHARS


def test_whole_name_is_cut_to_64_characters_keeping_the_server_prefix() -> None:
    name = ToolNamer().name("github", "x" * 100)
    assert len(name) == MAX_NAME_CHARS
    assert name == "github__" + "x" * (MAX_NAME_CHARS - len("github__"))
    assert SAFE.fullmatch(name)


def test_server_names_that_sanitise_alike_get_numbered_suffixes_in_declaration_order() -> None:
    parts = assign_server_names(["my.server", "my server", "My-Server", "other"])
    assert parts == {
        "my.server": "my-server",
        "my server": "my-server-2",
        "My-Server": "My-Server-3",
        "other": "other",
    }


def test_server_suffix_stays_within_the_server_budget() -> None:
    long = "a" * 40
    parts = assign_server_names([long, long + "!"])
    assert parts[long] == "a" * 30
    assert parts[long + "!"] == "a" * 28 + "-2"


def test_tools_that_collide_after_truncation_get_suffixes_that_fit() -> None:
    namer = ToolNamer()
    first = namer.name("srv", "t" * 70 + "_one")
    second = namer.name("srv", "t" * 70 + "_two")
    third = namer.name("srv", "t" * 70 + "_three")
    assert first == "srv__" + "t" * 59
    assert second == "srv__" + "t" * 57 + "-2"
    assert third == "srv__" + "t" * 57 + "-3"
    assert all(len(n) <= MAX_NAME_CHARS for n in (first, second, third))


def test_collisions_are_detected_case_insensitively() -> None:
    namer = ToolNamer()
    assert namer.name("srv", "Echo") == "srv__Echo"
    assert namer.name("srv", "echo") == "srv__echo-2"


def test_reserved_run_tool_names_are_never_reused() -> None:
    namer = ToolNamer(reserved=["time__now", "TIME__NOW-2"])
    assert namer.name("time", "now") == "time__now-3"


def test_every_generated_name_is_provider_safe() -> None:
    parts = assign_server_names(["9 lives", "a/b", "ok"])
    namer = ToolNamer()
    names = [namer.name(part, tool) for part in parts.values() for tool in ("x.y", "?", "é")]
    assert all(SAFE.fullmatch(n) and len(n) <= MAX_NAME_CHARS for n in names)
    assert len({n.lower() for n in names}) == len(names)
