"""The tool seam: what a tool is, what it receives, and what it returns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import msgspec

from nodmix.messages import JsonObject, ResultBlock, TextBlock
from nodmix.origin import TurnOrigin

ToolSource: TypeAlias = Literal["nodmix", "mcp", "client"]


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What the model sees of a tool."""

    name: str
    """Model-visible name, unique within a run (`[A-Za-z0-9_-]`, at most 64 characters)."""
    description: str
    parameters: JsonObject
    """JSON Schema of the arguments object (`type: object`)."""
    label: str | None = None
    """Short human label, shown in UIs and the code-mode catalog."""


class ToolOrigin(msgspec.Struct, frozen=True, kw_only=True):
    """Where a tool comes from; gives its stable catalog id `<source>:<owner>:<name>`."""

    source: ToolSource
    owner: str
    """`core` for built-in tools, the plugin id, the MCP server name, or the client owner."""
    name: str
    """The tool's own name at its origin (for MCP tools, the server's raw tool name)."""

    @property
    def id(self) -> str:
        """The catalog id, for example `nodmix:core:read` or `mcp:time:get_current_time`."""
        return f"{self.source}:{self.owner.strip() or 'core'}:{self.name}"


CORE_OWNER = "core"

APPROVAL_WAITING = "approval_waiting"
"""`ToolContext.extra` key: a callback `(waiting: bool) -> None` told when the call starts and
stops waiting for a person's approval (code mode suspends such a run with reason `approval`)."""


PROGRESS = "progress"
"""`ToolContext.extra` key: a callback `(text: str) -> None` that reports what a long call is
doing now (a `tool_progress` run event); see `report_progress`."""


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a tool call, as the model will see it."""

    content: tuple[ResultBlock, ...]
    details: Any = None
    """Structured data for UIs, hooks and code mode (not sent to the model)."""
    is_error: bool = False

    @classmethod
    def text(cls, text: str, *, details: Any = None) -> ToolResult:
        """A successful result holding one text block."""
        return cls(content=(TextBlock(text=text),), details=details)

    @classmethod
    def error(cls, message: str, *, details: Any = None) -> ToolResult:
        """A failed result; the model reads `message` and can react to it."""
        return cls(content=(TextBlock(text=message),), details=details, is_error=True)

    @property
    def text_content(self) -> str:
        """The text blocks joined by newlines."""
        content = self.content
        if len(content) == 1:  # the usual result: one block
            block = content[0]
            return block.text if isinstance(block, TextBlock) else ""
        return "\n".join(b.text for b in content if isinstance(b, TextBlock))


class ToolContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool call knows about the run it belongs to."""

    agent_id: str
    session_key: str
    session_id: str
    run_id: str
    call_id: str
    workspace: Path
    parent_call_id: str | None = None
    """For calls made from a code-mode program: the outer `exec`/`wait` call id."""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    origin: TurnOrigin | None = None
    """The chat the turn answers, for turns started by a channel message."""


def report_progress(ctx: ToolContext, text: str) -> None:
    """Tell the people watching the run what a long call is doing (no-op without a sink)."""
    report = ctx.extra.get(PROGRESS)
    if report is not None:
        report(text)


@runtime_checkable
class Tool(Protocol):
    """A callable tool. Raise `ToolError` to report a failure the model should see."""

    @property
    def spec(self) -> ToolSpec: ...

    @property
    def origin(self) -> ToolOrigin: ...

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult: ...


ToolFunction: TypeAlias = Callable[[JsonObject, ToolContext], Awaitable[ToolResult]]
QuickToolFunction: TypeAlias = Callable[[JsonObject, ToolContext], "ToolResult | None"]
"""A tool's synchronous form (`call_quick`): the result, or None (having done nothing) when
this call needs the async `call`."""


def quick_form(tool: Tool) -> QuickToolFunction | None:
    """The tool's synchronous form: its `call_quick` attribute, if it has one.

    A tool offers one only when the call returns at once (no network, no waiting on other
    tasks), is thread-safe and touches nothing bound to the event loop. Code mode runs such a
    call on the sandbox worker that made it when no hook and no gate has a say in it
    (`ToolExecutor.run_quick`), so the guest gets the result without a trip to the event loop.
    """
    quick: QuickToolFunction | None = getattr(tool, "call_quick", None)
    return quick


class SentCall(Protocol):
    """A call a tool sent from another thread (`send_form`), whose answer comes later."""

    def answered(self) -> bool:
        """Whether the answer (or the news that none will come) is in."""
        ...

    def notify(self, callback: Callable[[], None]) -> None:
        """Call `callback` (on any thread) once answered; at once if it already is."""
        ...

    def result(self) -> ToolResult | None:
        """Once answered: the result, or None when the call must go through the tool's `call`
        for the same call id after all (which then finishes or repeats it, as needed)."""
        ...

    def hand_over(self) -> None:
        """Nobody on this thread waits any more: the tool's `call` for the same call id awaits
        the answer instead of calling again."""
        ...

    def cancel(self) -> None:
        """Nobody will take the answer: tell the other side to stop."""
        ...


SendFunction: TypeAlias = Callable[[JsonObject, ToolContext], SentCall | None]
"""A tool's sending form (`send_quick`): the call sent, or None (nothing sent) when this call
needs the async `call`."""


def send_form(tool: Tool) -> SendFunction | None:
    """The tool's sending form: its `send_quick` attribute, if it has one.

    A tool offers one when a call can be sent from any thread without waiting (an MCP server's
    `tools/call` written to its stdin) and its answer arrives by itself. Code mode sends such
    calls from the sandbox worker that made them when no hook and no gate has a say in them
    (`ToolExecutor.send_quick`), and collects the answers there while the program waits.
    """
    send: SendFunction | None = getattr(tool, "send_quick", None)
    return send


class FunctionTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool made from an async function; the usual way plugins and tests define tools."""

    spec: ToolSpec
    origin: ToolOrigin
    fn: ToolFunction
    call_quick: QuickToolFunction | None = None
    """The synchronous form, for tools made with `create_quick` (see `quick_form`)."""

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Run the function."""
        return await self.fn(args, ctx)

    @classmethod
    def create_quick(
        cls,
        fn: Callable[[JsonObject, ToolContext], ToolResult],
        *,
        name: str,
        description: str,
        parameters: JsonObject | None = None,
        owner: str = CORE_OWNER,
        source: ToolSource = "nodmix",
        label: str | None = None,
    ) -> FunctionTool:
        """A tool from a synchronous function that returns at once and is thread-safe (see
        `quick_form`); it also serves the async `call`."""

        async def call(args: JsonObject, ctx: ToolContext) -> ToolResult:
            return fn(args, ctx)

        tool = cls.create(
            call,
            name=name,
            description=description,
            parameters=parameters,
            owner=owner,
            source=source,
            label=label,
        )
        return msgspec.structs.replace(tool, call_quick=fn)

    @classmethod
    def create(
        cls,
        fn: ToolFunction,
        *,
        name: str,
        description: str,
        parameters: JsonObject | None = None,
        owner: str = CORE_OWNER,
        source: ToolSource = "nodmix",
        label: str | None = None,
    ) -> FunctionTool:
        """Build a tool; `parameters` defaults to an empty object schema."""
        schema = parameters or {"type": "object", "properties": {}}
        spec = ToolSpec(name=name, description=description, parameters=schema, label=label)
        return cls(spec=spec, origin=ToolOrigin(source=source, owner=owner, name=name), fn=fn)


class ToolRunner(Protocol):
    """Runs one tool call through policy hooks, validation and error capture (the executor).

    Direct model calls and code-mode nested calls both go through it.
    """

    async def run(
        self,
        tool: Tool,
        args: JsonObject,
        ctx: ToolContext,
        *,
        kind: Any = "tool",
        input_kind: str | None = None,
    ) -> ToolResult: ...

    def run_quick(self, tool: Tool, args: JsonObject, ctx: ToolContext) -> ToolResult | None:
        """The call on the calling thread, when the tool has a synchronous form and nothing
        asynchronous has a say in it; None (nothing ran) when it must go through `run`."""
        ...

    def send_quick(
        self, tool: Tool, args: JsonObject, ctx: ToolContext
    ) -> SentCall | ToolResult | None:
        """The call sent from the calling thread, when the tool has a sending form and nothing
        asynchronous has a say in it; its result at once when refused before sending; None
        (nothing sent) when it must go through `run`."""
        ...
