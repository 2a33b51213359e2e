"""The one path every tool execution takes: validate, run hooks, call, report.

Model tool calls and (later) code-mode nested calls both go through `ToolExecutor.run`, so
argument validation, `before_tool_call` policy hooks, error handling and `after_tool_call`
observers behave the same everywhere. Nothing a tool or hook does short of cancellation escapes
`run`: failures become error results the model can read, and the turn goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

import anyio
import msgspec

from nodmix.errors import ToolError
from nodmix.hooks import (
    AfterToolCallInfo,
    BeforeToolCallResult,
    Hooks,
    ToolCallInfo,
    ToolKind,
    any_concerns,
)
from nodmix.messages import JsonObject, ToolCallBlock, ToolResultMessage
from nodmix.tools.base import SentCall, Tool, ToolContext, ToolResult, quick_form, send_form
from nodmix.tools.validation import SchemaValidator

logger = logging.getLogger(__name__)

ContextFactory: TypeAlias = Callable[[ToolCallBlock], ToolContext]
"""Builds the `ToolContext` for one model tool call (the call id differs per call)."""


class ToolGate(Protocol):
    """A policy check after the hooks (on the final arguments) and before the tool runs; it
    may wait (for an approval). Returns None to let the call run, or the refusal."""

    def concerns(self, tool: Tool) -> bool:
        """Whether `check` may do anything but let calls of `tool` through (when False, a call
        may skip the check, e.g. run on a code-mode worker, see `ToolExecutor.run_quick`)."""
        ...

    async def check(
        self, tool: Tool, params: JsonObject, ctx: ToolContext
    ) -> ToolResult | None: ...


def _call_info(
    tool: Tool, params: JsonObject, ctx: ToolContext, kind: ToolKind, input_kind: str | None
) -> ToolCallInfo:
    return ToolCallInfo(
        tool_name=tool.spec.name,
        tool_id=tool.origin.id,
        params=params,
        agent_id=ctx.agent_id,
        session_key=ctx.session_key,
        session_id=ctx.session_id,
        run_id=ctx.run_id,
        call_id=ctx.call_id,
        tool_kind=kind,
        tool_input_kind=input_kind,
        parent_call_id=ctx.parent_call_id,
        owner=tool.origin.owner,
        origin=ctx.origin,
    )


class ToolExecutor:
    """Runs tool calls with validation, hooks and error capture."""

    def __init__(self, hooks: Hooks) -> None:
        """Create an executor.

        Args:
            hooks: The hook registry; read on every call, so hooks added later take effect.
        """
        self._hooks = hooks
        self._validator = SchemaValidator()
        self.gate: ToolGate | None = None
        """The exec approval gate (`nodmix.security.gate`), set by the runtime."""

    async def run(
        self,
        tool: Tool,
        args: JsonObject,
        ctx: ToolContext,
        *,
        kind: ToolKind = "tool",
        input_kind: str | None = None,
    ) -> ToolResult:
        """Execute one tool call and return its result; never raises except on cancellation.

        Order: validate `args`, run `before_tool_call` hooks (which may block or rewrite), the
        gate (exec policy and approvals), call the tool, then run `after_tool_call` hooks. The
        after hooks see every outcome, including invalid and blocked calls, so an audit log is
        complete; a cancelled call skips them.

        Args:
            tool: The tool to call.
            args: The arguments the model (or code) passed.
            ctx: The call's context.
            kind: What kind of call this is, reported to hooks.
            input_kind: For code-mode cells, the source language, reported to hooks.
        """
        # Hook lists are read when they are due (hooks added later take effect); an empty one
        # costs no coroutine and no record (a code-mode cell makes many calls in a row).
        # The call's record for hooks is made only when a hook will read it.
        hooks = self._hooks
        info: ToolCallInfo | None = None
        params = args
        blocked = False
        duration_ms = 0.0
        result = self._validate(tool, args)
        if result is None:
            if hooks.before_tool_call and any_concerns(hooks.before_tool_call, tool.spec.name):
                info = _call_info(tool, args, ctx, kind, input_kind)
                info, result = await self._before(tool, info)
                params = info.params
            if result is None and self.gate is not None:
                result = await self._gate(self.gate, tool, params, ctx)
            blocked = result is not None
        if result is None:
            started = time.perf_counter()
            result = await self._call(tool, params, ctx)
            duration_ms = (time.perf_counter() - started) * 1000
        if not (hooks.after_tool_call and any_concerns(hooks.after_tool_call, tool.spec.name)):
            return result
        await self._after(
            AfterToolCallInfo(
                call=info if info is not None else _call_info(tool, params, ctx, kind, input_kind),
                result_text=result.text_content,
                is_error=result.is_error,
                details=result.details,
                duration_ms=duration_ms,
                blocked=blocked,
            )
        )
        return result

    def run_quick(self, tool: Tool, args: JsonObject, ctx: ToolContext) -> ToolResult | None:
        """`run` for a tool with a synchronous form (`quick_form`), on any thread, when
        nothing asynchronous has a say in the call: no hook runs for the tool and the gate does
        not concern it. Validation and error capture are `run`'s.

        Returns None, having run nothing, when the call must go through `run` instead (also
        when the tool's synchronous form declines this call).
        """
        quick = quick_form(tool)
        return None if quick is None else self._on_caller(tool, args, lambda: quick(args, ctx))

    def send_quick(
        self, tool: Tool, args: JsonObject, ctx: ToolContext
    ) -> SentCall | ToolResult | None:
        """`run_quick` for a tool with a sending form (`send_form`): the call sent from this
        thread, or its result at once (invalid arguments, a failed send), or None, having sent
        nothing, when the call must go through `run`."""
        send = send_form(tool)
        if send is None:
            return None
        sent: SentCall | None = None

        def start() -> None:
            nonlocal sent
            sent = send(args, ctx)

        failed = self._on_caller(tool, args, start)
        return failed if failed is not None else sent

    def _on_caller(
        self, tool: Tool, args: JsonObject, body: Callable[[], Any]
    ) -> ToolResult | None:
        # `body` on the calling thread when nothing asynchronous has a say in the call: what it
        # returned, the validation error, or None (it did not run, or returned None).
        if not self._unwatched(tool):
            return None
        invalid = self._validate(tool, args)
        if invalid is not None:
            return invalid
        return self._captured(tool, body)

    def _unwatched(self, tool: Tool) -> bool:
        # No hook runs for the tool and the gate does not concern it.
        hooks, name = self._hooks, tool.spec.name
        if (hooks.before_tool_call and any_concerns(hooks.before_tool_call, name)) or (
            hooks.after_tool_call and any_concerns(hooks.after_tool_call, name)
        ):
            return False
        gate = self.gate
        return gate is None or not gate.concerns(tool)

    def _captured(self, tool: Tool, body: Callable[[], Any]) -> ToolResult | None:
        # `run`'s error capture, for a synchronous body.
        name = tool.spec.name
        try:
            result: Any = body()
        except ToolError as exc:
            return ToolResult.error(str(exc) or f"{name} failed.")
        except Exception as exc:
            logger.exception("tool %s (%s) crashed", name, tool.origin.id)
            return ToolResult.error(f"{name} failed: {type(exc).__name__}: {exc}")
        if result is None or isinstance(result, ToolResult):
            return result
        return ToolResult.error(
            f"{name} failed: it returned {type(result).__name__} instead of a ToolResult."
        )

    async def run_calls(
        self,
        calls: Sequence[ToolCallBlock],
        tools: Mapping[str, Tool],
        ctx_factory: ContextFactory,
    ) -> list[ToolResultMessage]:
        """Run a model response's tool calls concurrently; results come back in call order.

        Args:
            calls: The tool calls, in the order the model made them.
            tools: The run's tools by model-visible name.
            ctx_factory: Builds each call's context.
        """
        results: list[ToolResult | None] = [None] * len(calls)

        async def run_one(index: int, call: ToolCallBlock) -> None:
            tool = tools.get(call.name)
            if tool is None:
                names = ", ".join(sorted(tools)) or "none"
                results[index] = ToolResult.error(
                    f"Unknown tool {call.name!r}. Available tools: {names}."
                )
                return
            results[index] = await self.run(tool, call.arguments, ctx_factory(call))

        async with anyio.create_task_group() as tg:
            for index, call in enumerate(calls):
                tg.start_soon(run_one, index, call)
        messages: list[ToolResultMessage] = []
        for call, result in zip(calls, results, strict=True):
            assert result is not None  # every task stored its result or the group raised
            messages.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=result.content,
                    details=result.details,
                    is_error=result.is_error,
                )
            )
        return messages

    def _validate(self, tool: Tool, args: JsonObject) -> ToolResult | None:
        problems = self._validator.problems(tool.spec.parameters, args)
        if not problems:
            return None
        listed = "\n".join(f"- {problem}" for problem in problems)
        return ToolResult.error(
            f"Invalid arguments for {tool.spec.name}:\n{listed}\n"
            "Fix the arguments to match the tool's schema and call it again.",
            details={"invalidArguments": problems},
        )

    async def _before(
        self, tool: Tool, info: ToolCallInfo
    ) -> tuple[ToolCallInfo, ToolResult | None]:
        """Run `before_tool_call` hooks: the (possibly rewritten) call, and a result if blocked."""
        rewritten = False
        for registered in list(self._hooks.before_tool_call):
            if not registered.concerns(info.tool_name):
                continue
            try:
                decision = await registered.hook(info)
                if decision is not None and not isinstance(decision, BeforeToolCallResult):
                    raise TypeError(f"returned {type(decision).__name__}, not BeforeToolCallResult")
            except Exception as exc:
                # Fail closed: a crashed policy hook must not silently let the call through.
                logger.exception("before_tool_call hook of %r failed", registered.owner)
                return info, ToolResult.error(
                    f"Tool call blocked: the before_tool_call hook of {registered.owner!r} "
                    f"failed ({type(exc).__name__}: {exc}).",
                    details={"blocked": True, "hookOwner": registered.owner},
                )
            if decision is None:
                continue
            if decision.block:
                reason = decision.reason or "no reason given"
                return info, ToolResult.error(
                    f"Tool call blocked by {registered.owner}: {reason}",
                    details={"blocked": True, "hookOwner": registered.owner, "reason": reason},
                )
            if decision.params is not None:
                info = msgspec.structs.replace(info, params=decision.params)
                rewritten = True
        # Rewritten arguments are checked like the model's: the tool must never see bad input.
        return info, self._validate(tool, info.params) if rewritten else None

    async def _gate(
        self, gate: ToolGate, tool: Tool, params: JsonObject, ctx: ToolContext
    ) -> ToolResult | None:
        try:
            return await gate.check(tool, params, ctx)
        except Exception as exc:
            # Fail closed, like a crashed hook: a broken policy check never lets a call through.
            logger.exception("the tool gate failed on %s", tool.origin.id)
            return ToolResult.error(
                f"Tool call blocked: the policy check failed ({type(exc).__name__}: {exc}).",
                details={"blocked": True},
            )

    async def _call(self, tool: Tool, args: JsonObject, ctx: ToolContext) -> ToolResult:
        name = tool.spec.name
        try:
            result: Any = await tool.call(args, ctx)
        except ToolError as exc:
            return ToolResult.error(str(exc) or f"{name} failed.")
        except Exception as exc:
            logger.exception("tool %s (%s) crashed", name, tool.origin.id)
            return ToolResult.error(f"{name} failed: {type(exc).__name__}: {exc}")
        if not isinstance(result, ToolResult):
            # Plugin tools are not type checked against the protocol at runtime.
            return ToolResult.error(
                f"{name} failed: it returned {type(result).__name__} instead of a ToolResult."
            )
        return result

    async def _after(self, info: AfterToolCallInfo) -> None:
        for registered in list(self._hooks.after_tool_call):
            if not registered.concerns(info.call.tool_name):
                continue
            try:
                await registered.hook(info)
            except Exception:
                # Observers must not change the outcome of a call that already happened.
                logger.exception("after_tool_call hook of %r failed", registered.owner)
