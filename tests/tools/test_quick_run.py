"""`ToolExecutor.run_quick`: a tool's synchronous form runs on the calling thread only when no
hook runs for the tool and the gate does not concern it, with `run`'s validation and error
capture; hooks that name their tools run only for those."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from nodmix.errors import ToolError
from nodmix.hooks import AfterToolCallInfo, Hooks, Registered, ToolCallInfo
from nodmix.messages import JsonObject
from nodmix.tools.base import FunctionTool, Tool, ToolContext, ToolResult, quick_form
from nodmix.tools.core.read import INLINE_READ_BYTES, ReadTool
from nodmix.tools.executor import ToolExecutor

pytestmark = pytest.mark.anyio

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "additionalProperties": False,
}


def _quick(calls: list[JsonObject], behaviour: str = "ok") -> FunctionTool:
    def body(args: JsonObject, ctx: ToolContext) -> Any:
        calls.append(args)
        if behaviour == "tool_error":
            raise ToolError("no such thing")
        if behaviour == "crash":
            raise RuntimeError("broken")
        if behaviour == "wrong_type":
            return "text"
        if behaviour == "decline":
            return None
        return ToolResult.text(f"n={args.get('n')}")

    return FunctionTool.create_quick(
        body, name="quick", description="Answers at once.", parameters=SCHEMA
    )


async def _noop_before(info: ToolCallInfo) -> None:
    return None


async def _noop_after(info: AfterToolCallInfo) -> None:
    return None


class Gate:
    def __init__(self, concerned: str) -> None:
        self.concerned = concerned

    def concerns(self, tool: Tool) -> bool:
        return tool.spec.name == self.concerned

    async def check(self, tool: Tool, params: JsonObject, ctx: ToolContext) -> ToolResult | None:
        return ToolResult.error("refused")


def test_a_quick_tool_runs_on_the_calling_thread(ctx: ToolContext) -> None:
    calls: list[JsonObject] = []
    result = ToolExecutor(Hooks()).run_quick(_quick(calls), {"n": 3}, ctx)
    assert result is not None and result.text_content == "n=3" and calls == [{"n": 3}]


async def test_the_async_form_of_a_quick_tool_gives_the_same_result(ctx: ToolContext) -> None:
    calls: list[JsonObject] = []
    result = await ToolExecutor(Hooks()).run(_quick(calls), {"n": 3}, ctx)
    assert result.text_content == "n=3" and calls == [{"n": 3}]


def test_a_tool_without_a_synchronous_form_is_left_to_run(ctx: ToolContext) -> None:
    async def body(args: JsonObject, ctx: ToolContext) -> ToolResult:
        return ToolResult.text("async")

    tool = FunctionTool.create(body, name="slow", description="x")
    assert quick_form(tool) is None
    assert ToolExecutor(Hooks()).run_quick(tool, {}, ctx) is None


@pytest.mark.parametrize(
    "hooks",
    [
        pytest.param(
            lambda h: h.before_tool_call.append(Registered("p", _noop_before)), id="before"
        ),
        pytest.param(lambda h: h.after_tool_call.append(Registered("p", _noop_after)), id="after"),
        pytest.param(
            lambda h: h.after_tool_call.append(
                Registered("p", _noop_after, tools=frozenset({"quick"}))
            ),
            id="after-naming-the-tool",
        ),
    ],
)
def test_a_hook_that_runs_for_the_tool_leaves_the_call_to_run(ctx: ToolContext, hooks: Any) -> None:
    registry = Hooks()
    hooks(registry)
    calls: list[JsonObject] = []
    assert ToolExecutor(registry).run_quick(_quick(calls), {"n": 1}, ctx) is None
    assert calls == []


def test_hooks_naming_other_tools_do_not_stop_a_quick_call(ctx: ToolContext) -> None:
    registry = Hooks()
    registry.before_tool_call.append(Registered("p", _noop_before, tools=frozenset({"write"})))
    registry.after_tool_call.append(Registered("p", _noop_after, tools=frozenset({"edit"})))
    calls: list[JsonObject] = []
    assert ToolExecutor(registry).run_quick(_quick(calls), {"n": 1}, ctx) is not None
    assert calls == [{"n": 1}]


def test_a_gate_that_concerns_the_tool_leaves_the_call_to_run(ctx: ToolContext) -> None:
    executor, calls = ToolExecutor(Hooks()), []
    executor.gate = Gate("quick")
    assert executor.run_quick(_quick(calls), {"n": 1}, ctx) is None
    executor.gate = Gate("exec")
    assert executor.run_quick(_quick(calls), {"n": 1}, ctx) is not None
    assert calls == [{"n": 1}]


def test_invalid_arguments_are_refused_before_the_tool_runs(ctx: ToolContext) -> None:
    calls: list[JsonObject] = []
    result = ToolExecutor(Hooks()).run_quick(_quick(calls), {"n": "x"}, ctx)
    assert result is not None and result.is_error
    assert result.text_content.startswith("Invalid arguments for quick:") and calls == []


@pytest.mark.parametrize(
    ("behaviour", "text"),
    [
        ("tool_error", "no such thing"),
        ("crash", "quick failed: RuntimeError: broken"),
        ("wrong_type", "quick failed: it returned str instead of a ToolResult."),
    ],
)
def test_failures_become_error_results_as_in_run(
    ctx: ToolContext, behaviour: str, text: str
) -> None:
    result = ToolExecutor(Hooks()).run_quick(_quick([], behaviour), {}, ctx)
    assert result is not None and result.is_error and result.text_content == text


def test_a_tool_may_decline_a_call_for_its_async_form(ctx: ToolContext) -> None:
    calls: list[JsonObject] = []
    assert ToolExecutor(Hooks()).run_quick(_quick(calls, "decline"), {}, ctx) is None
    assert calls == [{}]


async def test_hooks_naming_tools_run_only_for_those(ctx: ToolContext) -> None:
    seen: list[str] = []

    async def hook(info: ToolCallInfo) -> None:
        seen.append(info.tool_name)

    async def after(info: AfterToolCallInfo) -> None:
        seen.append(f"after {info.call.tool_name}")

    registry = Hooks()
    registry.before_tool_call.append(Registered("p", hook, tools=frozenset({"other"})))
    registry.after_tool_call.append(Registered("p", after, tools=frozenset({"quick"})))
    executor = ToolExecutor(registry)
    await executor.run(_quick([]), {"n": 1}, ctx)
    assert seen == ["after quick"]


def test_read_answers_small_files_at_once_and_declines_large_ones(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "small.txt").write_text("one\ntwo\n", encoding="utf-8")
    (workspace / "large.txt").write_text("x" * (INLINE_READ_BYTES + 1), encoding="utf-8")
    executor, read = ToolExecutor(Hooks()), ReadTool()
    results: list[ToolResult | None] = []
    thread = threading.Thread(
        target=lambda: results.extend(
            executor.run_quick(read, {"path": name}, ctx) for name in ("small.txt", "large.txt")
        )
    )
    thread.start()
    thread.join(10)
    small, large = results
    assert small is not None and small.text_content == "one\ntwo"
    assert large is None


def test_read_of_an_image_is_left_to_the_async_path(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert ToolExecutor(Hooks()).run_quick(ReadTool(), {"path": "photo.png"}, ctx) is None


def test_read_of_a_path_outside_the_workspace_is_refused_on_the_quick_path_too(
    ctx: ToolContext,
) -> None:
    result = ToolExecutor(Hooks()).run_quick(ReadTool(), {"path": "/etc/passwd"}, ctx)
    assert result is not None and result.is_error and "workspace" in result.text_content
