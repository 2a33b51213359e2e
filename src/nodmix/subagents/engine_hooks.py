"""The context engine's subagent lifecycle: `prepare_subagent_spawn` before a child's first
turn (its rollback handle undone when the spawn then fails) and `on_subagent_ended` when the
child's run ends or its session is archived. Both members are optional; an engine without
them is skipped. A failing `prepare` fails the spawn with the engine's one-line error; a
failing `on_subagent_ended` is logged and changes nothing (the run has ended either way)."""

from __future__ import annotations

import inspect
import logging
from typing import Any, Literal

import anyio

from nodmix.context.base import ContextEngine, SubagentEndedParams, SubagentSpawnParams
from nodmix.subagents.records import SubagentRun

log = logging.getLogger("nodmix.subagents")

HOOK_TIMEOUT_SECONDS = 30.0
"""How long a hook may take before it counts as failed."""


async def prepare_spawn(engine: ContextEngine, params: SubagentSpawnParams) -> object | None:
    """Call `prepare_subagent_spawn`; its rollback handle (or None).

    Raises:
        PluginError: the engine's hook failed (a plugin engine's error names it).
        TimeoutError: it took longer than `HOOK_TIMEOUT_SECONDS`.
    """
    hook = getattr(engine, "prepare_subagent_spawn", None)
    if hook is None:
        return None
    with anyio.fail_after(HOOK_TIMEOUT_SECONDS):
        result: object = await _maybe_await(hook(params))
    return result


async def roll_back(handle: object | None) -> None:
    """Undo a preparation (a failure is logged: the spawn has failed already)."""
    if handle is None:
        return
    undo = handle if callable(handle) else getattr(handle, "rollback", None)
    if not callable(undo):
        return
    try:
        with anyio.fail_after(HOOK_TIMEOUT_SECONDS):
            await _maybe_await(undo())
    except Exception:
        log.warning("the context engine's subagent rollback failed", exc_info=True)


async def subagent_ended(engine: ContextEngine, run: SubagentRun, *, swept: bool = False) -> None:
    """Call `on_subagent_ended` for `run` (never raises)."""
    hook = getattr(engine, "on_subagent_ended", None)
    if hook is None:
        return
    reason: Literal["completed", "failed", "swept"] = "swept"
    if not swept:
        reason = "completed" if run.status == "completed" else "failed"
    params = SubagentEndedParams(
        parent_session_key=run.parent_key,
        child_session_key=run.child_key,
        reason=reason,
        run_id=run.run_id,
        status=run.status,
    )
    try:
        with anyio.CancelScope(shield=True), anyio.fail_after(HOOK_TIMEOUT_SECONDS):
            await _maybe_await(hook(params))
    except Exception:
        log.warning("the context engine's on_subagent_ended failed", exc_info=True)


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
