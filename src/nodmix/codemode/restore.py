"""Continuing a run written by an earlier process: attach it to the `wait` that resumes it.

A run loaded from its file has its scope, output, counters and snapshot, but no catalog or
namespace functions (those hold live tools) and no running nested calls. The resuming turn
supplies the catalog and namespaces; calls that had settled before the file was written keep
their results, and calls that were still in flight are settled as failed with
`interrupted by restart`, so the guest can catch the error. Nothing is run again. Calls that
were still queued had never started: they join the queue again and start as slots free up
(the engine starts them, and re-arms the run's timers, right after `adopt`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast, get_args

from nodmix.catalog import CatalogEntry
from nodmix.codemode.nested import RunServices
from nodmix.codemode.run_records import INTERRUPTED_TEXT, CallRecord
from nodmix.codemode.runs import NestedCall, SuspendedRun
from nodmix.messages import JsonObject
from nodmix.tools.base import FunctionTool, ToolContext, ToolResult, ToolSource


def adopt(
    parked: SuspendedRun, services: RunServices, namespace_targets: dict[str, Any] | None
) -> None:
    """Bind a detached run to the resuming turn's catalog and settle its nested calls."""
    state = parked.state
    counters = state.catalog.counters
    state.catalog = dataclasses.replace(services.catalog, counters=counters)
    state.namespace_targets = dict(namespace_targets or {})
    for record in parked.restored_calls:
        call = _settled_call(cast(CallRecord, record), services)
        state.calls[call.request_id] = call
    for record in parked.restored_queue:
        state.queued.append(_queued_call(cast(CallRecord, record), services))
    parked.restored_calls = []
    parked.restored_queue = []
    parked.detached = False


def _queued_call(record: CallRecord, services: RunServices) -> NestedCall:
    return NestedCall(
        request_id=record.request_id,
        entry=services.catalog.by_id(record.tool_id) or _gone_entry(record),
        input=record.input,
        call_id=record.call_id,
        kind=record.kind,
        parent_call_id=record.parent_call_id,
    )


def _settled_call(record: CallRecord, services: RunServices) -> NestedCall:
    entry = services.catalog.by_id(record.tool_id) or _gone_entry(record)
    result = record.result if record.result is not None else ToolResult.error(INTERRUPTED_TEXT)
    call = NestedCall(
        request_id=record.request_id,
        entry=entry,
        input=record.input,
        call_id=record.call_id,
        kind=record.kind,
        parent_call_id=record.parent_call_id,
        result=result,
        ran=record.ran,
        services=services,
    )
    call.finished = call.started
    call.done.set()
    return call


def _gone_entry(record: CallRecord) -> CatalogEntry:
    """An entry for a tool the process no longer has (it is never called, only reported)."""
    source, _, rest = record.tool_id.partition(":")
    owner = rest.partition(":")[0] or "core"
    known = get_args(ToolSource)
    tool_source = cast(ToolSource, source if source in known else "nodmix")

    async def unavailable(args: JsonObject, ctx: ToolContext) -> ToolResult:
        return ToolResult.error(f"{record.tool_name} is no longer available")

    tool = FunctionTool.create(
        unavailable,
        name=record.tool_name,
        description="No longer available.",
        owner=owner,
        source=tool_source,
    )
    return CatalogEntry(
        id=record.tool_id,
        name=record.tool_name,
        description="No longer available.",
        source=tool_source,
        source_name=owner,
        tool=tool,
    )
