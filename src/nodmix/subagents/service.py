"""Subagents: a requester's turn hands a task to a subagent that runs its own turn in a new,
isolated session (`agent:<agentId>:subagent:<id>`), waits for the result or has it announced.

`Subagents` owns the runs of this process: the limits (`maxDepth`, `maxChildrenPerTurn`, and
`maxConcurrent` slots per agent and depth, so a subagent waiting on its own subagents never
holds the slot they need), the run records in the `SubagentStore`, the context engine's
subagent hooks, the usage a run adds to its requester's session, and the announcement of
results nobody waited for. A run the requester waits for runs in the requester's own task, so
cancelling the requester (`/stop`, a client that went away, its timeout) cancels the child
too. A run nobody waits for runs in the process's background group; a shutdown leaves its
record open, and the next start continues it (`recovery.py`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from anyio.abc import TaskGroup

from nodmix.context.base import ContextEngine, SubagentSpawnParams
from nodmix.errors import ConfigError, NodmixError
from nodmix.subagents.announce import Announcer, Listener
from nodmix.subagents.engine_hooks import prepare_spawn, roll_back, subagent_ended
from nodmix.subagents.host import SubagentHost
from nodmix.subagents.lineage import Depths, TurnCounts, Waits, child_origin
from nodmix.subagents.planning import SpawnRequest, plan_run
from nodmix.subagents.records import SubagentRun, run_id_of
from nodmix.subagents.settings import SubagentSettings, subagent_settings
from nodmix.subagents.store import Claim, SubagentStore
from nodmix.tools.base import ToolContext
from nodmix.tools.policy import ToolPolicy

if TYPE_CHECKING:
    from nodmix.loop import TurnResult

log = logging.getLogger("nodmix.subagents")

SESSION_TOOLS = (
    "sessions_spawn",
    "sessions_send",
    "sessions_list",
    "sessions_history",
    "agents_list",
)
"""The tools this package offers (core tools: catalog ids `nodmix:core:<name>`)."""
SPAWN_TOOL = "nodmix:core:sessions_spawn"
CONTINUE_TEXT = (
    "[Nodmix restarted while you were working on this task. Your work so far is above; "
    "finish the task and give your final answer.]"
)


class Subagents:
    """The subagent runs of one process (see the module docstring)."""

    def __init__(self, host: SubagentHost, store: SubagentStore, group: TaskGroup) -> None:
        self.host = host
        self.store = store
        self._group = group
        self.announcer = Announcer(host)
        self.depths = Depths(store.get)
        self.counts = TurnCounts()
        self.waits = Waits()
        self._slots: dict[tuple[str, int], anyio.CapacityLimiter] = {}
        self._open: dict[str, SubagentRun] = {}
        self._claims: dict[str, Claim] = {}
        self._detached: set[str] = set()
        self._changed = anyio.Event()
        self._unwritten: dict[str, SubagentRun] = {}
        """Newest states of waited-for runs not written yet (`_write_soon`)."""
        self._writing = anyio.Lock()
        """Held around each background write, so a state read before another write began is
        never written after it (`flush`)."""

    # ---- what others ask ------------------------------------------------------------------

    @property
    def listeners(self) -> list[Listener]:
        """Told of every result announced into a session."""
        return self.announcer.listeners

    def settings(self, agent_id: str) -> SubagentSettings:
        """`agent_id`'s subagent settings under the current config."""
        return subagent_settings(self.host.config, agent_id)

    def open_runs(self) -> list[SubagentRun]:
        """Runs of this process that are queued or running."""
        return list(self._open.values())

    def running_sessions(self) -> set[str]:
        """Sessions with a subagent turn running in this process."""
        # A copy first: `sessions_list` may ask from a worker thread (a database backend).
        return {run.child_key for run in list(self._open.values()) if run.status == "running"}

    def tool_policy(self, agent_id: str, session_key: str) -> ToolPolicy | None:
        """What a turn in `session_key` may use beyond the agent's own policy: a subagent's
        `subagents.tools`, no `sessions_spawn` at the agent's `maxDepth`, and none of the
        session tools when its subagents are off. None: nothing to add."""
        settings = self.settings(agent_id)
        if not settings.enabled:
            return ToolPolicy(deny=tuple(f"nodmix:core:{name}" for name in SESSION_TOOLS))
        depth = self.depths.of(session_key)
        deny: tuple[str, ...] = (SPAWN_TOOL,) if depth >= settings.max_depth else ()
        if run_id_of(session_key) is None:
            return ToolPolicy(deny=deny) if deny else None
        policy = settings.policy
        return ToolPolicy(allow=policy.allow, deny=(*policy.deny, *deny))

    async def settle(self) -> None:
        """Wait until no run of this process that nobody waits for is open."""
        while self._detached:
            changed = self._changed
            await changed.wait()

    # ---- spawning -------------------------------------------------------------------------

    async def spawn(self, request: SpawnRequest, ctx: ToolContext) -> dict[str, Any]:
        """Start a subagent for `ctx`'s turn: its result when `request.wait`, else at once
        `{status: accepted, runId, sessionKey}`.

        Raises:
            SpawnRefused: a limit or rule forbids it (one line naming it).
        """
        run = plan_run(
            self.host,
            request,
            ctx,
            settings=self.settings,
            depth=self.depths.of(ctx.session_key) + 1,
            spawned=self.counts.get(ctx.run_id),
            open_runs=len(self._open),
        )
        # Counted at once: the spawns of one reply run side by side.
        self.counts.add(ctx.run_id, 1)
        self._open[run.run_id] = run
        try:
            await self._create(run)
        except BaseException:
            self.counts.add(ctx.run_id, -1)
            self._open.pop(run.run_id, None)
            self._release(run.run_id)
            raise
        if run.wait:
            self.waits.add(run.parent_key, run.child_key)
            try:
                final = await self._execute(run)
            finally:
                self.waits.remove(run.parent_key, run.child_key)
            return final.result()
        self.launch(run)
        return {
            "status": "accepted",
            "runId": run.run_id,
            "sessionKey": run.child_key,
            **({"label": run.label} if run.label else {}),
            "note": "The subagent works on its own; its result will be posted into this "
            "conversation when it is ready. Do not wait or poll for it.",
        }

    async def _create(self, run: SubagentRun) -> None:
        """Prepare the context engine, create the child's session and, for a run nobody
        waits for, write its record before the spawn answers. A failure after the engine's
        preparation hands it the rollback."""
        host = self.host
        engine = self.engine_of(run)
        parent = await host.sessions.open_async(run.parent_key, create=False)
        handle = await prepare_spawn(
            engine,
            SubagentSpawnParams(
                parent_session_key=run.parent_key,
                child_session_key=run.child_key,
                transcript_ids=(parent.session_id,),
                transcript_files=(str(parent.transcript.path),),
                ttl_seconds=run.timeout_seconds,
                run_id=run.run_id,
            ),
        )
        saved = False
        try:
            # Claimed before its record exists, and held until its end is written, so no
            # other process takes it for abandoned.
            claim = self.store.claim(run.run_id)
            if claim is not None:
                self._claims[run.run_id] = claim
            if not run.wait:
                await anyio.to_thread.run_sync(self.store.save, run)
                saved = True
            agent = host.agent(run.child_agent)
            child = await host.sessions.open_async(run.child_key, workspace=agent.workspace)
            child.set_spawned(run.parent_key, run.label)
        except BaseException:
            with anyio.CancelScope(shield=True):
                if saved:
                    await anyio.to_thread.run_sync(self.store.remove, run.run_id)
                await roll_back(handle)
            raise
        if run.wait:
            self._write_soon(run)
        self.depths.remember(run)

    def launch(self, run: SubagentRun, *, resume: bool = False) -> None:
        """Run `run` in the background (its claim, if any, is in `_claims`)."""
        self._open[run.run_id] = run
        self._detached.add(run.run_id)
        self._group.start_soon(self._detached_run, run, resume)

    async def _detached_run(self, run: SubagentRun, resume: bool) -> None:
        try:
            await self._execute(run, resume=resume)
        finally:
            self._detached.discard(run.run_id)
            self._release(run.run_id)
            self._changed.set()
            self._changed = anyio.Event()

    # ---- running --------------------------------------------------------------------------

    async def _execute(self, run: SubagentRun, *, resume: bool = False) -> SubagentRun:
        """Run the child's turn in a slot, under its timeout; record and report the end."""
        settings = self.settings(run.parent_agent)
        slot = self._slot(run.parent_agent, run.depth, settings.max_concurrent)
        borrower = object()
        try:
            await slot.acquire_on_behalf_of(borrower)
            try:
                run = await self._save(
                    msgspec.structs.replace(run, status="running", started_at=time.time())
                )
                final = await self._turn(run, resume)
            finally:
                slot.release_on_behalf_of(borrower)
        except anyio.get_cancelled_exc_class():
            if not run.wait:  # only a shutdown cancels these: the next start continues it
                self._open.pop(run.run_id, None)
                raise
            with anyio.CancelScope(shield=True):
                await self.finish(_ended(run, "cancelled", "its requester's turn was stopped"))
            raise
        except Exception as exc:
            log.warning("subagent %s failed", run.run_id, exc_info=True)
            final = _ended(run, "failed", str(exc) or type(exc).__name__)
        return await self.finish(final)

    async def _turn(self, run: SubagentRun, resume: bool) -> SubagentRun:
        text = run.task
        if resume and await self._has_task(run):
            text = CONTINUE_TEXT
        origin = child_origin(run.origin, run.parent_key)
        done = None
        with anyio.CancelScope(deadline=anyio.current_time() + run.timeout_seconds) as scope:
            done = await self.host.run_turn(
                text,
                agent_id=run.child_agent,
                session_key=run.child_key,
                model=run.model,
                origin=origin,
            )
        if scope.cancelled_caught or done is None:
            return _ended(run, "timeout", f"no answer within {run.timeout_seconds:g} s")
        return _from_result(run, done.result)

    async def _has_task(self, run: SubagentRun) -> bool:
        """Whether the child's transcript holds its task (the turn got that far)."""
        try:
            session = await self.host.sessions.open_async(run.child_key, create=False)
        except NodmixError:
            return False
        from nodmix.messages import UserMessage

        return any(isinstance(m, UserMessage) for m in session.messages_for_model())

    def engine_of(self, run: SubagentRun) -> ContextEngine:
        """The context engine of the requester's agent (engines are made per agent), or the
        default agent's when that agent is gone from the config."""
        from nodmix.sessions.keys import resolve_session_key

        try:
            agent = self.host.agent(resolve_session_key(run.parent_key).agent_id)
        except NodmixError:
            return self.host.context_engine()
        return self.host.context_engine(agent)

    async def finish(self, final: SubagentRun, *, announce: bool = True) -> SubagentRun:
        """Record a run's end: the record, the requester's usage, the engine's hook and, for
        a run nobody waited for, the announcement."""
        self._open.pop(final.run_id, None)
        self.depths.remember(final)
        await self._count_usage(final)
        await subagent_ended(self.engine_of(final), final)
        if final.wait:
            self._write_soon(final)
            return final
        final = await self._save(final)
        if announce:
            final = await self.announce(final)
        return final

    async def announce(self, run: SubagentRun) -> SubagentRun:
        """Announce `run`'s result and record that it was (a failure leaves it for the next
        start, which announces it then)."""
        try:
            await self.announcer.announce(run)
        except ConfigError as exc:  # its agent is no longer configured: nobody to tell
            log.warning("subagent %s's result stays in its record: %s", run.run_id, exc)
        except Exception:
            log.warning("could not announce subagent %s's result", run.run_id, exc_info=True)
            return run
        return await self._save(msgspec.structs.replace(run, announced=True))

    async def _count_usage(self, run: SubagentRun) -> None:
        """Add the run's usage to the requester's session (its context size unchanged)."""
        usage = run.usage
        if not (usage.input or usage.output or usage.total_tokens):
            return
        try:
            parent = await self.host.sessions.open_async(run.parent_key, create=False)
            parent.update_usage(usage, context_tokens=parent.entry.context_tokens)
        except NodmixError:
            log.info("subagent %s: its requester's session is gone", run.run_id)

    async def _save(self, run: SubagentRun) -> SubagentRun:
        """Keep `run`'s new state: written before returning for a run nobody waits for (its
        record is what a restart goes by), in the background for one its requester waits
        for (whose requester would not outlive a crash either)."""
        if run.is_open:
            self._open[run.run_id] = run
        if run.wait:
            self._write_soon(run)
        else:
            await anyio.to_thread.run_sync(self.store.save, run)
        return run

    def _write_soon(self, run: SubagentRun) -> None:
        """Write `run` from a background task; states that arrive meanwhile are folded into
        the next write, in order."""
        writing = run.run_id in self._unwritten
        self._unwritten[run.run_id] = run
        if not writing:
            self._group.start_soon(self._writer, run.run_id)

    async def _writer(self, run_id: str) -> None:
        while run_id in self._unwritten:
            async with self._writing:
                await self._write_newest(run_id)

    async def _write_newest(self, run_id: str) -> None:
        run = self._unwritten.get(run_id)
        if run is None:  # `flush` wrote it
            return
        try:
            await anyio.to_thread.run_sync(self.store.save, run)
        except OSError:
            log.warning("could not write subagent run %s", run_id, exc_info=True)
        if self._unwritten.get(run_id) is run:
            del self._unwritten[run_id]
            if not run.is_open:
                self._release(run_id)

    async def flush(self) -> None:
        """Write every state still waiting for its background write (the runtime closes:
        a writer not started yet would be cancelled, leaving a finished run recorded as
        running, to be reported lost by the next start)."""
        with anyio.CancelScope(shield=True):
            async with self._writing:
                for run_id in list(self._unwritten):
                    await self._write_newest(run_id)

    def _slot(self, agent_id: str, depth: int, size: int) -> anyio.CapacityLimiter:
        limiter = self._slots.get((agent_id, depth))
        if limiter is None:
            limiter = self._slots[(agent_id, depth)] = anyio.CapacityLimiter(size)
        elif limiter.total_tokens != size:
            limiter.total_tokens = size  # a reloaded config
        return limiter

    def keep_claim(self, run_id: str, claim: Claim) -> None:
        """Hold `claim` until the run ends (recovery hands over the claims it took)."""
        self._claims[run_id] = claim

    def _release(self, run_id: str) -> None:
        claim = self._claims.pop(run_id, None)
        if claim is not None:
            claim.release()


def _ended(run: SubagentRun, status: Any, error: str) -> SubagentRun:
    return msgspec.structs.replace(run, status=status, error=error, ended_at=time.time())


def _from_result(run: SubagentRun, result: TurnResult) -> SubagentRun:
    now = time.time()
    last = result.last_message
    if result.stop_reason == "error":
        error = (last.error_message if last else None) or "the model stopped with an error"
        return msgspec.structs.replace(
            run, status="failed", error=error, usage=result.usage, ended_at=now
        )
    if result.stop_reason == "aborted":
        return msgspec.structs.replace(
            run, status="cancelled", error="the turn was aborted", usage=result.usage, ended_at=now
        )
    return msgspec.structs.replace(
        run, status="completed", reply=result.reply, usage=result.usage, ended_at=now
    )
