"""Plugin engines behind contract checks: one clear error naming the engine and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from nodmix.context.base import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    CompactParams,
    CompactResult,
    ContextEngineInfo,
    EngineContext,
    IngestParams,
)
from nodmix.context.checked import CheckedContextEngine, create_engine
from nodmix.context.sdk import build_memory_system_prompt_addition, delegate_compaction_to_runtime
from nodmix.errors import PluginError
from nodmix.messages import (
    AssistantMessage,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio


class Engine:
    info = ContextEngineInfo(id="demo", name="Demo")

    def __init__(self, assembled: Any = None, fail: bool = False) -> None:
        self.assembled = assembled
        self.fail = fail

    async def ingest(self, params: IngestParams) -> None:
        if self.fail:
            raise ValueError("index is corrupt")

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        return self.assembled  # type: ignore[no-any-return]

    async def compact(self, params: CompactParams) -> CompactResult:
        return {"ok": True}  # type: ignore[return-value]


def _params() -> AssembleParams:
    return AssembleParams(
        session_id="s", session_key="agent:main:main", messages=[], token_budget=100
    )


def _checked(engine: object, failures: list[str] | None = None) -> CheckedContextEngine:
    sink = (lambda engine_id, message: failures.append(message)) if failures is not None else None
    return CheckedContextEngine(engine, engine_id="demo", owner="demo-plugin", on_failure=sink)  # type: ignore[arg-type]


async def test_a_wrong_return_type_is_one_error_naming_engine_plugin_and_fix() -> None:
    failures: list[str] = []
    engine = _checked(Engine(assembled={"messages": []}), failures)
    with pytest.raises(PluginError) as caught:
        await engine.assemble(_params())
    text = str(caught.value)
    assert "'demo'" in text and "'demo-plugin'" in text and "assemble()" in text
    assert "returned dict" in text and "plugins.slots.contextEngine back to 'legacy'" in text
    assert failures == [text]
    with pytest.raises(PluginError, match="compact"):
        await engine.compact(CompactParams(session_id="s", session_key="k", trigger="manual"))


async def test_a_crash_inside_the_engine_is_wrapped_the_same_way() -> None:
    engine = _checked(Engine(fail=True))
    with pytest.raises(PluginError) as caught:
        await engine.ingest(
            IngestParams(session_id="s", session_key="k", message=UserMessage(content=()))
        )
    assert "ValueError: index is corrupt" in str(caught.value)


async def test_foreign_objects_among_assembled_messages_are_rejected() -> None:
    foreign: list[Any] = [{"role": "user"}]
    engine = _checked(Engine(assembled=AssembleResult(messages=foreign, estimated_tokens=1)))
    with pytest.raises(PluginError, match="dict among its messages"):
        await engine.assemble(_params())


async def test_unpaired_tool_messages_from_an_engine_are_repaired() -> None:
    orphan = ToolResultMessage(
        tool_call_id="gone", tool_name="t", content=(TextBlock(text="x"),), is_error=False
    )
    call = AssistantMessage(
        content=(ToolCallBlock(id="c1", name="t", arguments={}),), stop_reason="toolUse"
    )
    user = UserMessage(content=(TextBlock(text="hi"),))
    engine = _checked(
        Engine(assembled=AssembleResult(messages=[user, orphan, call], estimated_tokens=5))
    )
    result = await engine.assemble(_params())
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "toolResult"]  # orphan dropped, missing result added


def test_optional_members_are_visible_exactly_when_the_engine_has_them() -> None:
    class WithAfterTurn(Engine):
        async def after_turn(self, params: AfterTurnParams) -> None:
            return None

    assert getattr(_checked(Engine()), "after_turn", None) is None
    assert callable(getattr(_checked(WithAfterTurn()), "after_turn", None))


def test_an_engine_missing_a_method_or_info_is_refused_at_creation() -> None:
    class NoCompact:
        info = ContextEngineInfo(id="x", name="x")

        async def ingest(self, params: IngestParams) -> None: ...

        async def assemble(self, params: AssembleParams) -> AssembleResult:
            return AssembleResult(messages=(), estimated_tokens=0)

    with pytest.raises(PluginError, match=r"has no compact\(\) method"):
        create_engine(lambda ctx: NoCompact(), EngineContext(), engine_id="x", owner="p")  # type: ignore[arg-type,return-value]

    def broken(ctx: EngineContext) -> Engine:
        raise RuntimeError("missing config key")

    with pytest.raises(PluginError, match="failed to start: RuntimeError: missing config key"):
        create_engine(broken, EngineContext(), engine_id="x", owner="p")


async def test_delegating_engines_reach_the_runtime_compactor() -> None:
    calls: list[CompactParams] = []

    async def service(params: CompactParams) -> CompactResult:
        calls.append(params)
        return CompactResult(ok=True, compacted=True)

    params = CompactParams(session_id="s", session_key="k", trigger="manual")
    result = await delegate_compaction_to_runtime(
        EngineContext(services={"compact_with_runtime": service}), params
    )
    assert result.compacted and calls == [params]
    missing = await delegate_compaction_to_runtime(EngineContext(), params)
    assert not missing.ok and missing.reason


def test_memory_prompt_addition_names_the_files_and_fits_the_tools(tmp_path: Any) -> None:
    (tmp_path / "memory").mkdir()
    for day in ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"):
        (tmp_path / "memory" / f"{day}.md").write_text("x", encoding="utf-8")
    text = build_memory_system_prompt_addition(workspace=tmp_path, available_tools={"read", "edit"})
    assert text is not None and "MEMORY.md" in text
    assert "memory/2026-01-04.md, memory/2026-01-03.md, memory/2026-01-02.md" in text
    assert "2026-01-01" not in text and "update MEMORY.md" in text
    assert build_memory_system_prompt_addition(workspace=tmp_path, available_tools=()) is None
    assert build_memory_system_prompt_addition(workspace=None, available_tools={"read"}) is None
