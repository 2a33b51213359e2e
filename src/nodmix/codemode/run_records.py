"""A suspended run as a file: what `wait` needs to continue it after the process restarted.

```
offset  size  field
0       8     magic b"NDMXRUN\\x00"
8       2     format version (1)
10      2     reserved (0)
12      4     length of the record (msgpack)
16      4     length of the snapshot
20      4     crc32 of record + snapshot
24      n     record: scope, settings, output, counters, nested calls (see `RunRecord`)
24+n    m     the VM snapshot exactly as the sandbox made it (already zstd-compressed)
```

The length and checksum fields make a torn or damaged file fail to decode instead of
restoring garbage. Nested calls are kept with their result when they settled before the file
was written; a call still in flight was interrupted by the restart and is delivered to the
guest as failed when the run is resumed, never run again. Calls still waiting in the queue
(past `maxPendingToolCalls`) never started, so they are queued again; guest timers keep their
wall-clock due time and are re-armed for what is left of it (one already due fires at once).
The program's source map is kept too, so an error after the restart still names the program's
line. Records written before these fields existed decode with them empty.
"""

from __future__ import annotations

import struct
import time
import zlib
from typing import Any, Final

import msgspec

from nodmix.catalog import RunCatalog
from nodmix.catalog.catalog import CatalogCounters
from nodmix.codemode.locations import SourceMap
from nodmix.codemode.runs import NestedCall, RunScope, RunState, SuspendedRun
from nodmix.codemode.settings import CodeModeSettings, resolve_settings
from nodmix.codemode.timers import Timer
from nodmix.config.schema import CodeModeConfig
from nodmix.tools.base import ToolResult

MAGIC: Final = b"NDMXRUN\x00"
FORMAT_VERSION: Final = 1
_HEADER: Final = struct.Struct("<8sHHIII")
INTERRUPTED_TEXT: Final = "interrupted by restart"
"""What the guest receives for a nested call that was in flight when the process stopped."""


class RunFileError(Exception):
    """A run file is torn, damaged, or of another format."""


class CallRecord(msgspec.Struct, kw_only=True):
    """One dispatched nested call the guest has not received yet."""

    request_id: int
    tool_id: str
    tool_name: str
    input: dict[str, Any]
    call_id: str
    kind: str
    parent_call_id: str
    ran: bool
    result: ToolResult | None = None
    """Set when the call settled before the file was written."""


class TimerRecord(msgspec.Struct, kw_only=True):
    """One guest timer the guest has not been told about yet."""

    request_id: int
    token: str
    due_at: float
    """Wall-clock seconds when it fires."""
    order: int
    fired: bool
    cleared: bool


class SourceRecord(msgspec.Struct, kw_only=True):
    """The program and, for TypeScript, the script that ran (`locations.SourceMap`)."""

    program: str
    generated: str | None = None


class ScopeRecord(msgspec.Struct, kw_only=True):
    agent_id: str
    session_key: str
    session_id: str
    run_id: str


class RunRecord(msgspec.Struct, kw_only=True):
    """Everything of a parked run but its snapshot."""

    id: str
    reason: str
    created_at: float
    expires_at: float
    """In the store's clock (wall-clock seconds for the file store)."""
    scope: ScopeRecord
    settings: CodeModeSettings
    boot_json: str
    output: list[dict[str, Any]]
    output_bytes: int
    output_exceeded: bool
    seq: int
    parent_call_id: str
    turn_id: str
    nested_errors: list[str]
    yield_request: tuple[int, str | None] | None
    counters: dict[str, int]
    calls: list[CallRecord]
    queued: list[CallRecord] = []
    """Calls waiting for a free slot, in order (never started)."""
    timers: list[TimerRecord] = []
    source: SourceRecord | None = None


_encoder = msgspec.msgpack.Encoder(enc_hook=str)
_decoder = msgspec.msgpack.Decoder(RunRecord)


def record_of(run: SuspendedRun, created_at: float) -> RunRecord:
    """Capture a parked run (on the event loop: the state keeps changing while it is parked)."""
    state = run.state
    scope = state.scope
    counters = state.catalog.counters
    return RunRecord(
        id=run.id,
        reason=run.reason,
        created_at=created_at,
        expires_at=run.expires_at,
        scope=ScopeRecord(
            agent_id=scope.agent_id,
            session_key=scope.session_key,
            session_id=scope.session_id,
            run_id=scope.run_id,
        ),
        settings=state.settings,
        boot_json=state.boot_json,
        output=list(state.output),
        output_bytes=state.output_bytes,
        output_exceeded=state.output_exceeded,
        seq=state.seq,
        parent_call_id=state.parent_call_id,
        turn_id=state.turn_id,
        nested_errors=sorted(state.nested_errors),
        yield_request=state.yield_request,
        counters={name: getattr(counters, name) for name in _COUNTER_NAMES},
        calls=[_call_record(call) for call in state.calls.values()] + run.restored_calls,
        queued=[_call_record(call) for call in (*state.queued, *state.new_calls)]
        + run.restored_queue,
        timers=[
            TimerRecord(
                request_id=timer.request_id,
                token=timer.token,
                due_at=timer.due_at(),
                order=timer.order,
                fired=timer.fired,
                cleared=timer.cleared,
            )
            for timer in (*state.timers.active.values(), *state.timers.new)
        ],
        source=_source_record(state.source_map),
    )


def _call_record(call: NestedCall) -> CallRecord:
    return CallRecord(
        request_id=call.request_id,
        tool_id=call.entry.id,
        tool_name=call.entry.name,
        input=call.input,
        call_id=call.call_id,
        kind=call.kind,
        parent_call_id=call.parent_call_id,
        ran=call.ran,
        result=call.result if call.done.is_set() else None,
    )


def _source_record(source_map: object) -> SourceRecord | None:
    if not isinstance(source_map, SourceMap):
        return None
    return SourceRecord(program=source_map.program, generated=source_map.generated)


_COUNTER_NAMES: Final = tuple(CatalogCounters.__dataclass_fields__)


def encode(record: RunRecord, snapshot: bytes) -> bytes:
    """The file bytes of a run."""
    body = _encoder.encode(record)
    crc = zlib.crc32(snapshot, zlib.crc32(body))
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(body), len(snapshot), crc)
    return b"".join((header, body, snapshot))


def decode(data: bytes) -> tuple[RunRecord, bytes]:
    """Parse `encode` output.

    Raises:
        RunFileError: Torn (short), damaged (checksum), or not a run file of this version.
    """
    if len(data) < _HEADER.size:
        raise RunFileError("truncated run file")
    magic, version, _, body_len, snap_len, crc = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise RunFileError("not a code-mode run file")
    if version != FORMAT_VERSION:
        raise RunFileError(f"unsupported run file version {version}")
    start = _HEADER.size
    if start + body_len + snap_len != len(data):
        raise RunFileError("truncated run file")
    body = data[start : start + body_len]
    snapshot = data[start + body_len :]
    if zlib.crc32(snapshot, zlib.crc32(body)) != crc:
        raise RunFileError("run file checksum mismatch")
    try:
        record = _decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RunFileError(f"unreadable run record: {exc}") from None
    _check_bounds(record)
    return record, bytes(snapshot)


#: The settings a run file carries that bound what its run may use.
_BOUNDED: Final = (
    "timeout_ms",
    "memory_limit_bytes",
    "max_output_bytes",
    "max_snapshot_bytes",
    "max_pending_tool_calls",
    "max_queued_tool_calls",
    "snapshot_ttl_seconds",
    "search_default_limit",
    "max_search_limit",
    "max_source_bytes",
)


def _check_bounds(record: RunRecord) -> None:
    # A resumed run keeps the settings it was parked with: they must be ones the config could
    # have given (a crafted file must not buy a run a longer budget or more memory).
    values = {name: getattr(record.settings, name) for name in _BOUNDED}
    allowed = resolve_settings(CodeModeConfig(enabled=True, **values))
    if any(getattr(allowed, name) != value for name, value in values.items()):
        raise RunFileError("run settings outside their allowed ranges")
    if not set(record.counters) <= set(_COUNTER_NAMES):
        raise RunFileError("unknown run counters")


def detached_run(record: RunRecord, snapshot: bytes, now: float | None = None) -> SuspendedRun:
    """A run loaded from disk. Its catalog and namespace functions are the live process's,
    attached by `codemode.restore.adopt` when a `wait` of its session resumes it. Its timers
    get what is left of their delay at `now` (wall-clock seconds, default the current time)."""
    scope = record.scope
    counters = CatalogCounters(**record.counters)
    state = RunState(
        scope=RunScope(
            agent_id=scope.agent_id,
            session_key=scope.session_key,
            session_id=scope.session_id,
            run_id=scope.run_id,
        ),
        settings=record.settings,
        catalog=RunCatalog(entries=(), counters=counters),
        boot_json=record.boot_json,
        output=list(record.output),
        output_bytes=record.output_bytes,
        output_exceeded=record.output_exceeded,
        yield_request=record.yield_request,
        seq=record.seq,
        parent_call_id=record.parent_call_id,
        turn_id=record.turn_id,
        nested_errors=set(record.nested_errors),
    )
    if record.source is not None:
        state.source_map = SourceMap(record.source.program, record.source.generated)
    now = time.time() if now is None else now
    for saved in sorted(record.timers, key=lambda t: t.order):
        timer = Timer(
            request_id=saved.request_id,
            token=saved.token,
            delay=max(0.0, saved.due_at - now),
            order=saved.order,
            fired=saved.fired,
            cleared=saved.cleared,
        )
        state.timers.restore(timer)
    return SuspendedRun(
        id=record.id,
        state=state,
        snapshot=snapshot,
        expires_at=record.expires_at,
        reason=record.reason,
        detached=True,
        restored_calls=list(record.calls),
        restored_queue=list(record.queued),
    )
