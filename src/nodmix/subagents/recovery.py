"""What a (re)started gateway does with the subagent runs on disk, and tidying up after them.

`recover` goes through the records no live process holds (`SubagentStore.claim`):

- a run nobody waited for that was queued or running is started again: a queued one with its
  task, a running one continues in its session ("Nodmix restarted while you were working..."),
  at most `MAX_RESTARTS` times, after which it is reported failed;
- a run whose requester waited is reported failed: that requester's turn ended with the
  process, and its transcript already shows the call interrupted;
- a finished run whose result was never announced is announced now.

`sweep` archives the sessions of subagents that finished `archiveAfterMinutes` ago (and that
nobody used since): the store entry goes, the transcript moves to `sessions/archive/`, and the
context engine hears `on_subagent_ended` with reason `swept`. Of the records of finished runs
the newest `KEEP_ENDED` are kept, archived ones dropped first.

`serve` runs both in the gateway: once at start, then every `SWEEP_SECONDS` (which also picks
up runs another process left behind when it stopped).
"""

from __future__ import annotations

import logging
import time

import anyio
import msgspec

from nodmix.errors import NodmixError
from nodmix.sessions.transcript import move_to_archive
from nodmix.subagents.engine_hooks import subagent_ended
from nodmix.subagents.records import SubagentRun
from nodmix.subagents.service import Subagents

log = logging.getLogger("nodmix.subagents")

MAX_RESTARTS = 2
"""Restarts a run nobody waits for is continued through; after that it fails."""
SWEEP_SECONDS = 60.0
KEEP_ENDED = 2000
"""Records of finished runs kept (for listings and their sessions' place); older ones go."""


async def recover(service: Subagents) -> int:
    """Continue, fail or announce what the runs on disk need; how many were handled."""
    handled = 0
    for run in await anyio.to_thread.run_sync(service.store.all):
        if run.run_id in {r.run_id for r in service.open_runs()}:
            continue  # this process runs it
        if not run.is_open and (run.wait or run.announced or run.archived):
            continue
        claim = service.store.claim(run.run_id)
        if claim is None:
            continue  # another live process has it
        handled += 1
        if not run.is_open:
            try:
                await service.announce(run)
            finally:
                claim.release()
            continue
        if run.wait:
            service.keep_claim(run.run_id, claim)  # released once the failure is written
            await service.finish(
                _failed(run, "interrupted: Nodmix stopped while its requester waited")
            )
            continue
        if run.restarts >= MAX_RESTARTS:
            try:
                await service.finish(
                    _failed(run, f"interrupted: Nodmix restarted {run.restarts + 1} times")
                )
            finally:
                claim.release()
            continue
        log.info("continuing subagent run %s after a restart", run.run_id)
        service.keep_claim(run.run_id, claim)
        resume = run.status == "running"
        service.launch(msgspec.structs.replace(run, restarts=run.restarts + 1), resume=resume)
    return handled


def _failed(run: SubagentRun, error: str) -> SubagentRun:
    return msgspec.structs.replace(run, status="failed", error=error, ended_at=time.time())


async def sweep(service: Subagents, now: float | None = None) -> int:
    """Archive the sessions of finished subagents whose time is up; how many were."""
    now = time.time() if now is None else now
    runs = await anyio.to_thread.run_sync(service.store.all)
    archived = 0
    for run in runs:
        if run.is_open or run.archived or (not run.wait and not run.announced):
            continue
        minutes = service.settings(run.child_agent).archive_after_minutes
        if minutes <= 0:
            continue
        if await _archive(service, run, now - minutes * 60.0):
            archived += 1
    await anyio.to_thread.run_sync(_prune, service, runs)
    return archived


async def _archive(service: Subagents, run: SubagentRun, before: float) -> bool:
    sessions = service.host.sessions
    agent_id = run.child_agent
    try:
        entry = sessions.store(agent_id).get(run.child_key)
    except NodmixError:
        return False
    last = max(run.ended_at or run.created_at, (entry.updated_at / 1000) if entry else 0.0)
    if last > before or sessions.turn_lock(run.child_key).locked():
        return False
    if entry is not None:
        try:
            files = sessions.archive(agent_id, [run.child_key])
        except NodmixError:
            log.warning("could not archive subagent session %s", run.child_key, exc_info=True)
            return False
        if run.child_key not in files:
            return False  # a turn started there meanwhile
        for path in files.values():
            try:
                await anyio.to_thread.run_sync(move_to_archive, path)
            except OSError:
                log.warning("could not move %s to the archive", path, exc_info=True)
    await subagent_ended(service.engine_of(run), run, swept=True)
    done = msgspec.structs.replace(run, archived=True)
    await anyio.to_thread.run_sync(service.store.save, done)
    return True


def _prune(service: Subagents, runs: list[SubagentRun]) -> None:
    """Keep the newest `KEEP_ENDED` records of runs that are over (archived ones go first);
    open runs and results not yet announced are always kept."""
    done = [r for r in runs if not r.is_open and (r.wait or r.announced)]
    done.sort(key=lambda r: (not r.archived, r.created_at))
    for run in done[: max(0, len(done) - KEEP_ENDED)]:
        service.store.remove(run.run_id)


async def serve(service: Subagents, *, interval: float = SWEEP_SECONDS) -> None:
    """Recover at once, then sweep and recover every `interval` seconds, until cancelled."""
    while True:
        try:
            await recover(service)
            await sweep(service)
        except Exception:  # housekeeping must not stop the gateway
            log.warning("subagent housekeeping failed", exc_info=True)
        await anyio.sleep(interval)
