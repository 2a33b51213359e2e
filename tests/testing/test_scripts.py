"""The built-in scripts: `echo`, `tool-then-answer` and `memory-search`."""

from __future__ import annotations

import json

import pytest

from nodmix.messages import (
    AssistantMessage,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    user_message,
)
from nodmix.providers.base import ModelRequest, ModelSpec, collect
from nodmix.providers.fake import FunctionProvider, ModelReply, ReplyToolCall
from nodmix.testing.model_server import load_script
from nodmix.testing.scripts import echo, memory_search, tool_then_answer
from nodmix.tools.base import ToolSpec

PATH = {"type": "object", "properties": {"path": {"type": "string"}}}
READ = ToolSpec(name="read", description="", parameters=PATH)
LS = ToolSpec(name="ls", description="", parameters=PATH)
FETCH = ToolSpec(
    name="web_fetch",
    description="",
    parameters={
        "type": "object",
        "properties": {"max": {"type": "integer"}, "url": {"type": "string"}},
        "required": ["url"],
    },
)


def request(*messages: object, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model=ModelSpec(provider="t", id="m"),
        system="",
        messages=[user_message(m) if isinstance(m, str) else m for m in messages],  # type: ignore[misc]
        tools=tools if tools is not None else [READ, LS, FETCH],
    )


def test_echo_answers_with_the_last_user_text() -> None:
    assert echo.respond(request("first", "second")) == ModelReply.text("second")
    assert echo.respond(request()) == ModelReply.text("(no user message)")
    assert echo.respond(request("")) == ModelReply.text("(empty message)")


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ("read notes.txt", "read", {"path": "notes.txt"}),
        ("Please read the file `docs/guide.md`.", "read", {"path": "docs/guide.md"}),
        ("show me notes.txt", "read", {"path": "notes.txt"}),
        ("list the files in src", "ls", {"path": "src"}),
        ("List the current directory.", "ls", {"path": "."}),
        ("ls ..", "ls", {"path": ".."}),
        (
            "use web_fetch https://example.com/a?b=1",
            "web_fetch",
            {"url": "https://example.com/a?b=1"},
        ),
    ],
)
def test_reading_and_listing_requests_call_the_matching_tool(
    text: str, name: str, arguments: dict[str, str]
) -> None:
    reply = tool_then_answer.respond(request(text))
    assert reply.tool_calls == (ReplyToolCall(name, arguments),)


def test_verbs_fall_back_to_other_tool_names() -> None:
    read_file = ToolSpec(name="read_file", description="", parameters=PATH)
    reply = tool_then_answer.respond(request("read a.txt", tools=[read_file]))
    assert reply.tool_calls == (ReplyToolCall("read_file", {"path": "a.txt"}),)


def test_without_a_matching_tool_it_echoes() -> None:
    assert tool_then_answer.respond(request("read a.txt", tools=[])) == ModelReply.text(
        "read a.txt"
    )
    assert tool_then_answer.respond(request("hello")) == ModelReply.text("hello")


def test_after_the_tool_ran_it_answers_with_the_results() -> None:
    call = AssistantMessage(
        content=(
            ToolCallBlock(id="1", name="read", arguments={"path": "a"}),
            ToolCallBlock(id="2", name="read", arguments={"path": "b"}),
        )
    )
    results = [
        ToolResultMessage(
            tool_call_id=i, tool_name="read", content=(TextBlock(text=t),), is_error=False
        )
        for i, t in (("1", "alpha"), ("2", "beta"))
    ]
    assert tool_then_answer.respond(request("read a and b", call, *results)) == ModelReply.text(
        "alpha\nbeta"
    )


@pytest.mark.anyio
async def test_the_full_round_trip_through_a_function_provider() -> None:
    provider = FunctionProvider(tool_then_answer.respond)
    first = request("read notes.txt")
    call = await collect(provider, first)
    result = ToolResultMessage(
        tool_call_id=call.tool_calls[0].id,
        tool_name="read",
        content=(TextBlock(text="the notes"),),
        is_error=False,
    )
    answer = await collect(provider, request(*first.messages, call, result))
    assert answer.text == "the notes"


@pytest.mark.parametrize(
    "name", ["echo", "tool-then-answer", "tool_then_answer", "nodmix.testing.scripts.echo"]
)
def test_scripts_load_by_name_or_module(name: str) -> None:
    assert callable(load_script(name))


def test_loading_a_module_without_respond_fails_clearly() -> None:
    with pytest.raises(ValueError, match="defines no respond"):
        load_script("nodmix.testing.scripts")


EXEC = ToolSpec(name="exec", description="", parameters={"type": "object"})
WAIT = ToolSpec(name="wait", description="", parameters={"type": "object"})


def test_code_mode_script_reads_a_file_through_search_and_call() -> None:
    from nodmix.testing.scripts import code_mode

    reply = code_mode.respond(request("read notes.txt", tools=[EXEC, WAIT]))
    assert reply.tool_calls[0].name == "exec"
    program = reply.tool_calls[0].arguments["code"]
    assert "tools.search('read file')" in program
    assert 'tools.call(read.id, { path: "notes.txt" })' in program


def test_code_mode_script_uses_a_named_catalog_tool_with_its_first_string_argument() -> None:
    from nodmix.testing.scripts import code_mode

    reply = code_mode.respond(request("use get_weather Paris", tools=[EXEC, WAIT]))
    program = reply.tool_calls[0].arguments["code"]
    assert program.startswith('const name = "get_weather";')
    assert 'tools.call(hit.id, key ? { [key]: "Paris" } : {})' in program


def test_code_mode_script_follows_waiting_with_wait_and_answers_the_value() -> None:
    from nodmix.testing.scripts import code_mode

    call = AssistantMessage(content=(ToolCallBlock(id="c1", name="exec", arguments={"code": "x"}),))

    def after(text: str) -> ModelReply:
        result = ToolResultMessage(
            tool_call_id="c1", tool_name="exec", content=(TextBlock(text),), is_error=False
        )
        return code_mode.respond(request("hi", call, result, tools=[EXEC, WAIT]))

    assert after('{"status": "waiting", "runId": "r1", "reason": "x"}') == ModelReply.tool_call(
        "wait", {"runId": "r1"}
    )
    assert after('{"status": "completed", "value": "the text"}') == ModelReply.text("the text")


def test_code_mode_script_without_code_mode_acts_like_tool_then_answer() -> None:
    from nodmix.testing.scripts import code_mode

    assert code_mode.respond(request("read notes.txt")) == tool_then_answer.respond(
        request("read notes.txt")
    )


def test_memory_search_script_asks_the_users_message_and_reports_the_hits() -> None:
    search = ToolSpec(name="memory_search", description="", parameters={"type": "object"})
    first = memory_search.respond(request("the dentist?", tools=[search]))
    assert first.tool_calls == (ReplyToolCall("memory_search", {"query": "the dentist?"}),)
    hit = {"path": "memory/a.md", "startLine": 3, "endLine": 4, "score": 0.5, "snippet": "Dr. R"}
    result = ToolResultMessage(
        tool_call_id="c1",
        tool_name="memory_search",
        content=(TextBlock(text=json.dumps({"results": [hit]})),),
        is_error=False,
    )
    answer = memory_search.respond(request("the dentist?", result, tools=[search]))
    assert answer.content == "memory/a.md:3-4 (0.5)\n\nDr. R"
    assert memory_search.respond(request("hi", tools=[])).content == "hi"
