"""Holding plugin context engines to their contract.

A plugin engine runs inside every turn, so a bug in it would otherwise surface as a stack trace
from deep inside the loop, or worse, as a request the provider rejects. `CheckedContextEngine`
wraps a plugin's engine and turns any crash or wrong return value into one `PluginError` that
names the engine, the plugin and the fix. Nodmix does not fall back to `legacy` silently: the
user chose this engine, and quietly running another one would hide the breakage.

It also repairs tool-call pairing in what `assemble` returns (an engine that windows history
can easily drop a call and keep its result), since providers reject unpaired tool messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from nodmix.context.base import (
    OPTIONAL_MEMBERS,
    AssembleParams,
    AssembleResult,
    CompactParams,
    CompactResult,
    ContextEngine,
    ContextEngineFactory,
    ContextEngineInfo,
    EngineContext,
    IngestParams,
)
from nodmix.errors import PluginError
from nodmix.messages import AssistantMessage, ToolResultMessage, UserMessage
from nodmix.sessions.replay import repair_tool_pairing

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)

FailureSink = Callable[[str, str], None]
"""Told `(engine_id, message)` about every failure (for `nodmix doctor`)."""


def fix_hint(engine_id: str) -> str:
    """The fix every engine error ends with."""
    return (
        f"fix or update the plugin, or set plugins.slots.contextEngine back to 'legacy' "
        f"(it is {engine_id!r})"
    )


def check_engine_shape(engine: object, engine_id: str, owner: str) -> ContextEngineInfo:
    """The engine's `info`, after checking it has every required member.

    Raises:
        PluginError: A member is missing or `info` is not a `ContextEngineInfo`-like object.
    """
    where = f"context engine {engine_id!r} from plugin {owner!r}"
    for member in ("ingest", "assemble", "compact"):
        if not callable(getattr(engine, member, None)):
            raise PluginError(
                f"{where} has no {member}() method, so it does not implement the "
                f"ContextEngine protocol; {fix_hint(engine_id)}"
            )
    info = getattr(engine, "info", None)
    if not isinstance(getattr(info, "id", None), str):
        raise PluginError(
            f"{where} has no valid `info` (a ContextEngineInfo with an id); {fix_hint(engine_id)}"
        )
    assert info is not None
    return ContextEngineInfo(
        id=info.id,
        name=str(getattr(info, "name", info.id)),
        version=str(getattr(info, "version", "0")),
        owns_compaction=bool(getattr(info, "owns_compaction", False)),
    )


def create_engine(
    factory: ContextEngineFactory,
    ctx: EngineContext,
    *,
    engine_id: str,
    owner: str,
    trusted: bool = False,
    on_failure: FailureSink | None = None,
) -> ContextEngine:
    """Build an engine from its factory; plugin engines come back behind contract checks.

    Raises:
        PluginError: The factory failed or the engine lacks required members (the message
            names the engine, the plugin and the fix).
    """
    try:
        engine = factory(ctx)
    except Exception as exc:
        message = (
            f"context engine {engine_id!r} from plugin {owner!r} failed to start: "
            f"{type(exc).__name__}: {exc}; {fix_hint(engine_id)}"
        )
        if on_failure is not None:
            on_failure(engine_id, message)
        raise PluginError(message) from exc
    if trusted:
        return engine
    try:
        return CheckedContextEngine(engine, engine_id=engine_id, owner=owner, on_failure=on_failure)
    except PluginError as exc:
        if on_failure is not None:
            on_failure(engine_id, str(exc))
        raise


class CheckedContextEngine:
    """A plugin engine behind contract checks (see the module docstring)."""

    def __init__(
        self,
        engine: ContextEngine,
        *,
        engine_id: str,
        owner: str,
        on_failure: FailureSink | None = None,
    ) -> None:
        self.inner = engine
        self.engine_id = engine_id
        self.owner = owner
        self._on_failure = on_failure
        self.info = check_engine_shape(engine, engine_id, owner)

    def _error(self, member: str, problem: str) -> PluginError:
        message = (
            f"context engine {self.engine_id!r} from plugin {self.owner!r} failed in "
            f"{member}(): {problem}; {fix_hint(self.engine_id)}"
        )
        if self._on_failure is not None:
            self._on_failure(self.engine_id, message)
        return PluginError(message)

    async def _call(self, member: str, call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await call()
        except anyio.get_cancelled_exc_class():
            raise
        except PluginError:
            raise
        except Exception as exc:
            raise self._error(member, f"{type(exc).__name__}: {exc}") from exc

    async def ingest(self, params: IngestParams) -> None:
        """Forward to the engine."""
        await self._call("ingest", lambda: self.inner.ingest(params))

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        """Forward, check the result, and repair tool pairing in its messages."""
        result = await self._call("assemble", lambda: self.inner.assemble(params))
        if not isinstance(result, AssembleResult):
            raise self._error("assemble", f"returned {type(result).__name__}, not AssembleResult")
        messages: Sequence[Any] = result.messages
        bad = next((m for m in messages if not isinstance(m, _MESSAGE_TYPES)), None)
        if bad is not None:
            raise self._error("assemble", f"returned a {type(bad).__name__} among its messages")
        if not isinstance(result.estimated_tokens, int):
            raise self._error("assemble", "estimated_tokens is not an int")
        repaired = repair_tool_pairing(messages)
        if len(repaired) != len(messages) or any(
            a is not b for a, b in zip(repaired, messages, strict=True)
        ):
            result = AssembleResult(
                messages=repaired,
                estimated_tokens=result.estimated_tokens,
                system_prompt_addition=result.system_prompt_addition,
                prompt_authority=result.prompt_authority,
            )
        return result

    async def compact(self, params: CompactParams) -> CompactResult:
        """Forward and check the result."""
        result = await self._call("compact", lambda: self.inner.compact(params))
        if not isinstance(result, CompactResult):
            raise self._error("compact", f"returned {type(result).__name__}, not CompactResult")
        return result

    def __getattr__(self, name: str) -> Any:
        # Optional members exist on the wrapper exactly when the engine has them, so the loop's
        # `getattr(engine, "after_turn", None)` sees the truth.
        if name not in OPTIONAL_MEMBERS:
            raise AttributeError(name)
        member = getattr(self.inner, name)

        async def checked(*args: Any, **kwargs: Any) -> Any:
            return await self._call(name, lambda: member(*args, **kwargs))

        return checked
