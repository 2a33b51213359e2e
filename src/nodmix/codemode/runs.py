"""Host-side state of a code-mode run, and the store of suspended runs.

A run starts with `exec` and may be continued by `wait` steps. The VM never stays alive between
steps: a suspended run is its compressed snapshot plus the host state the snapshot does not hold
(nested calls in flight, output so far, catalog counters, scope). Runs are scoped to the agent
and session that created them, expire after `snapshotTtlSeconds`, and are capped at 64 per
process. `RunStore` keeps them in memory only; `codemode.run_files.FileRunStore` also writes
each one to the state directory so `wait` can continue it after a restart. Both satisfy
`SuspendedRunStore`, the seam the engine uses: a run is `saved` before the model is told it is
`waiting`, and a run being resumed is `consume`d but stays restorable until the result of the
`wait` that resumed it is `recorded` in the transcript.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

import anyio

from nodmix.catalog import CatalogEntry, RunCatalog
from nodmix.codemode.settings import SUSPENDED_RUN_CAP, CodeModeSettings
from nodmix.codemode.tasks import CallCancel
from nodmix.codemode.timers import Timer, Timers
from nodmix.origin import TurnOrigin
from nodmix.tools.base import SentCall, ToolResult


@dataclass(frozen=True, slots=True, kw_only=True)
class RunScope:
    """Who a code-mode run belongs to."""

    agent_id: str
    session_key: str
    session_id: str
    run_id: str
    """The agent turn that started it."""
    origin: TurnOrigin | None = None
    """The chat the turn answers (channel turns); nested tool calls carry it too."""


class Flag:
    """Set once when a nested call settles. A plain flag, not an `anyio.Event`: calls are
    recorded on the sandbox worker thread, outside the event loop, and nothing awaits it
    (waiters use `RunState.changed`)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """Mark the call settled."""
        self._set = True

    def is_set(self) -> bool:
        """Whether the call settled."""
        return self._set


@dataclass(slots=True, kw_only=True)
class NestedCall:
    """One tool call made by guest code."""

    request_id: int
    entry: CatalogEntry
    input: dict[str, Any]
    call_id: str
    kind: str = "call"
    """`call` (tools.*), `mcp` (MCP namespace), `ns` (plugin namespace)."""
    parent_call_id: str = ""
    """The `exec`/`wait` call during which the guest made this call."""
    result: ToolResult | None = None
    done: Flag = field(default_factory=lambda: Flag())
    cancel: CallCancel | None = None
    """Created at dispatch, so the call can be cancelled even before its task starts."""
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    services: Any = None
    """The `RunServices` of the step that dispatched it (to project it if it is abandoned)."""
    ran: bool = False
    """The tool was actually invoked (a call cancelled before its task started never runs)."""
    abandoned: bool = False
    """The run ended before the guest received the result (completed, failed, aborted...)."""
    projected: bool = False
    """Already written to the transcript."""
    awaiting_approval: bool = False
    """The call waits for a person to approve it (the run suspends with reason `approval`)."""
    sent: SentCall | None = None
    """Sent from a sandbox worker and handed to the loop (`codemode.sent`), whose run of the
    tool takes the answer; cancelled (`nested.drop_sent`) if that run never starts."""

    def describe(self) -> dict[str, Any]:
        """The pending-call shape shown in a `waiting` result (no raw input)."""
        return {"id": str(self.request_id), "toolId": self.entry.id, "toolName": self.entry.name}


Settled: TypeAlias = "NestedCall | Timer"
"""What a round delivers to the guest: settled tool calls and fired (or cleared) timers."""


@dataclass(slots=True, kw_only=True)
class RunState:
    """Everything a run keeps between steps apart from the VM snapshot."""

    scope: RunScope
    settings: CodeModeSettings
    catalog: RunCatalog
    boot_json: str
    """The guest boot data (catalog, safe names, API files, namespaces), built once per run."""
    output: list[dict[str, Any]] = field(default_factory=list)
    output_bytes: int = 2
    output_exceeded: bool = False
    output_refused_bytes: int = 0
    """Size of the output item that would have passed `maxOutputBytes` (for the message)."""
    calls: dict[int, NestedCall] = field(default_factory=dict)
    """Dispatched calls whose results the guest has not received yet."""
    new_calls: list[NestedCall] = field(default_factory=list)
    """Calls recorded during the current step, dispatched when it returns."""
    queued: deque[NestedCall] = field(default_factory=deque)
    """Calls waiting for a free slot (at most `maxPendingToolCalls` run at once), in order."""
    timers: Timers = field(default_factory=Timers)
    """Guest timers (`setTimeout`, `sleep`...) armed on the host clock."""
    source_map: Any = None
    """Maps guest error locations back to the program (`codemode.locations.SourceMap`)."""
    yield_request: tuple[int, str | None] | None = None
    overflow: bool = False
    changed: anyio.Event = field(default_factory=anyio.Event)
    seq: int = 0
    parent_call_id: str = ""
    turn_id: str = ""
    """The agent turn that last drove the run (exec, or the latest wait); see `abort_turn`."""
    nested_errors: set[str] = field(default_factory=set)
    """Messages of errors delivered to the guest, to recognise an uncaught tool failure."""
    namespace_targets: dict[str, Any] = field(default_factory=dict)
    """Host-side map of callable namespace paths (filled by the namespace runtime)."""
    handoff: Any = None
    """The fast lane of the worker step in progress, if any (`codemode.handoff.Handoff`)."""
    in_flight: int = 0
    """Calls the worker step in progress sent itself and has not handed over (`codemode.sent`)."""
    on_settle: Callable[[], None] | None = None
    """Called when a nested call settles while the run is parked (a durable store rewrites
    the run so the result survives a restart)."""

    def next_call_id(self, tool_name: str) -> str:
        """Id of a nested call: parent call, tool and a per-run sequence number."""
        self.seq += 1
        return f"{_id_prefix(self.parent_call_id)}:{tool_name}:{self.seq}"

    def awaiting_approval(self) -> bool:
        """Some unsettled call waits for a person's approval."""
        return any(c.awaiting_approval and not c.done.is_set() for c in self.calls.values())

    def outstanding(self) -> int:
        """Calls in flight, queued, or recorded and not yet delivered."""
        return len(self.calls) + len(self.queued) + len(self.new_calls) + self.in_flight

    def running(self) -> int:
        """Calls started and not settled yet."""
        return sum(1 for call in self.calls.values() if not call.done.is_set())

    def settled(self) -> list[Settled]:
        """Settled calls (in request order), then fired or cleared timers (in due order)."""
        calls: list[Settled] = [c for c in self.calls.values() if c.done.is_set()]
        if len(calls) > 1:  # (one awaited call at a time needs no sorting)
            calls.sort(key=lambda c: c.request_id)
        if self.timers.active:
            calls.extend(self.timers.settled())
        return calls

    def notify(self) -> None:
        """Wake whoever waits for a nested call to settle (on the event loop)."""
        self.changed.set()
        if self.handoff is not None:
            self.handoff.offer()
        if self.on_settle is not None:
            self.on_settle()


@functools.lru_cache(maxsize=256)
def _id_prefix(parent_call_id: str) -> str:
    # Every call of a step shares its parent: sanitise it once, not per call.
    parent = "".join(c if c.isalnum() or c in "_.:-" else "_" for c in parent_call_id)
    return parent[:120] or "call"


@dataclass(slots=True, kw_only=True)
class SuspendedRun:
    """A run parked between steps."""

    id: str
    state: RunState
    snapshot: bytes
    expires_at: float
    reason: str
    resuming: bool = False
    detached: bool = False
    """Loaded from disk after a restart: `codemode.restore.adopt` attaches the live catalog."""
    restored_calls: list[Any] = field(default_factory=list)
    """Nested calls of a detached run (`run_records.CallRecord`), settled or interrupted."""
    restored_queue: list[Any] = field(default_factory=list)
    """Queued calls of a detached run (`run_records.CallRecord`), never started."""


class RunNotSaved(Exception):
    """A parked run could not be made to survive a restart (the message says why)."""


class RunStoreFull(Exception):
    """The store's cap (runs, or bytes on disk) is reached; the message says which."""

    def __init__(
        self, message: str = "too many suspended code mode runs; finish or abandon some first."
    ) -> None:
        super().__init__(message)


class SuspendedRunStore(Protocol):
    """Where parked runs live between `exec`/`wait` steps (memory, files, or a shared store)."""

    def __len__(self) -> int: ...

    def park(self, state: RunState, snapshot: bytes, reason: str) -> SuspendedRun:
        """Store a suspended run under a new id (`RunStoreFull` past the cap)."""
        ...

    async def saved(self, run: SuspendedRun) -> None:
        """Return once `run` would survive a kill of the process (`RunNotSaved` if it cannot):
        the engine tells the model a run is `waiting` only after this."""
        ...

    def get(self, run_id: str) -> SuspendedRun | None:
        """A parked run by id, or None."""
        ...

    def consume(self, run_id: str, call_id: str) -> SuspendedRun | None:
        """Take a parked run out to resume it in the `wait` call `call_id`: it is no longer
        parked, but what lets it survive a restart stays until `recorded(call_id)`."""
        ...

    def recorded(self, call_id: str) -> None:
        """The result of the `exec`/`wait` call `call_id` is in the transcript: a run that
        call consumed is gone for good."""
        ...

    def drop(self, run_id: str) -> SuspendedRun | None:
        """Remove a run for good (it completed, failed or was aborted)."""
        ...

    def expire(self) -> list[SuspendedRun]:
        """Sweep: remove and return runs whose TTL passed."""
        ...

    def take(self, predicate: Callable[[SuspendedRun], bool]) -> list[SuspendedRun]:
        """Remove and return the parked runs (not being resumed) that match `predicate`."""
        ...

    def clear(self) -> list[SuspendedRun]:
        """Process shutdown: release every run this process holds."""
        ...

    def ended(self, run_id: str) -> tuple[RunScope, str] | None:
        """Scope and reason (`expired`, `aborted`, `resumed`) of a run no longer parked."""
        ...

    def mark_ended(self, run_id: str, scope: RunScope, reason: str) -> None:
        """Remember why a run ended."""
        ...


class RunStore:
    """The in-process map of suspended runs (never written to disk)."""

    def __init__(
        self, *, cap: int = SUSPENDED_RUN_CAP, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._runs: OrderedDict[str, SuspendedRun] = OrderedDict()
        self._ended: OrderedDict[str, tuple[RunScope, str]] = OrderedDict()
        """Recently ended runs (`expired`, `aborted`, `resumed`), so `wait` can say what
        happened to them."""
        self._cap = cap
        self._clock = clock

    def __len__(self) -> int:
        return len(self._runs)

    def park(self, state: RunState, snapshot: bytes, reason: str) -> SuspendedRun:
        """Store a suspended run under a new id."""
        if len(self._runs) >= self._cap:
            raise RunStoreFull
        run = SuspendedRun(
            id=f"cm_{uuid.uuid4().hex}",
            state=state,
            snapshot=snapshot,
            reason=reason,
            expires_at=self._clock() + state.settings.snapshot_ttl_seconds,
        )
        self._runs[run.id] = run
        return run

    async def saved(self, run: SuspendedRun) -> None:
        """Nothing to wait for: runs in memory do not survive a restart."""

    def get(self, run_id: str) -> SuspendedRun | None:
        """A live run by id."""
        return self._runs.get(run_id)

    def consume(self, run_id: str, call_id: str) -> SuspendedRun | None:
        """Take a run out to resume it (in memory, that is all there is to it)."""
        return self.drop(run_id)

    def recorded(self, call_id: str) -> None:
        """Nothing is kept for consumed runs in memory."""

    def was_expired(self, run_id: str) -> RunScope | None:
        """The scope of a run that expired recently (to tell `wait` it expired, not unknown)."""
        ended = self._ended.get(run_id)
        return ended[0] if ended is not None and ended[1] == "expired" else None

    def ended(self, run_id: str) -> tuple[RunScope, str] | None:
        """Scope and reason (`expired`, `aborted`, `resumed`) of a run no longer parked."""
        return self._ended.get(run_id)

    def mark_ended(self, run_id: str, scope: RunScope, reason: str) -> None:
        """Remember why a run ended (bounded: the oldest of 1024 records are forgotten)."""
        self._ended[run_id] = (scope, reason)
        while len(self._ended) > 1024:
            self._ended.popitem(last=False)

    def drop(self, run_id: str) -> SuspendedRun | None:
        """Remove a run (it completed, failed, or was resumed into a new suspension)."""
        return self._runs.pop(run_id, None)

    def expire(self) -> list[SuspendedRun]:
        """Remove and return the runs whose TTL passed (not the ones being resumed)."""
        now = self._clock()
        gone = [r for r in self._runs.values() if r.expires_at <= now and not r.resuming]
        for run in gone:
            del self._runs[run.id]
            self.mark_ended(run.id, run.state.scope, "expired")
        return gone

    def take(self, predicate: Callable[[SuspendedRun], bool]) -> list[SuspendedRun]:
        """Remove and return the parked runs (not being resumed) that match `predicate`."""
        gone = [r for r in self._runs.values() if not r.resuming and predicate(r)]
        for run in gone:
            del self._runs[run.id]
        return gone

    def clear(self) -> list[SuspendedRun]:
        """Remove every run (process shutdown)."""
        runs = list(self._runs.values())
        self._runs.clear()
        return runs
