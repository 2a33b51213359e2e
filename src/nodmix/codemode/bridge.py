"""The host side of the guest bridge for one code-mode step.

Handler methods run on the sandbox worker thread while the guest is paused inside a call, so
they only do quick, thread-safe work: answer from the run catalog (search, describe, API data),
collect output, and *record* tool calls. Recorded calls are dispatched on the event loop after
the step returns, which is what lets an over-limit batch fail before any of its calls runs. A
call of a quick tool may run right here instead (`codemode.quick`).
"""

from __future__ import annotations

import json
from typing import Any

from nodmix.catalog import CatalogLookupError
from nodmix.codemode.habits import SOURCES
from nodmix.codemode.locations import output_too_large
from nodmix.codemode.runs import NestedCall, RunState
from nodmix.codemode.sent import Sent
from nodmix.sandbox import HostCallError, TrustedScript

MAX_INPUT_BYTES = 1 << 20
#: How much longer `json.dumps` of a parsed value can be than the guest's JSON of it: an
#: astral character is one code point in the guest's text and 12 characters escaped.
_DUMPS_GROWTH = 12
_TEXT_ENVELOPE = len(json.dumps({"type": "text", "text": ""})) - 2 + 1  # + the separator


class StepHandler:
    """`HostHandler` for one step of a run."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    # ---- synchronous calls --------------------------------------------------------------------

    def on_call(self, op: str, payload_json: str) -> str | TrustedScript | None:
        """`boot`, `text`, `texts`, `json`, `source` (lazy guest scripts), `timer_clear`."""
        if op == "boot":
            return self.state.boot_json
        if op == "text":
            self._output({"type": "text", "text": payload_json})
            return None
        if op == "json":
            self._output({"type": "json", "value": json.loads(payload_json)})
            return None
        if op == "texts":  # a batch of console lines
            self._texts(payload_json)
            return None
        if op == "source":
            source = SOURCES.get(payload_json)
            if source is None:
                raise HostCallError(f"unknown guest script {payload_json!r}")
            return TrustedScript(f"({source})", f"<{payload_json}>")
        if op == "timer_clear":
            self.state.timers.clear(payload_json)
            return None
        raise HostCallError(f"unknown bridge operation {op!r}")

    def _texts(self, batch_json: str) -> None:
        lines = [str(line) for line in json.loads(batch_json)]
        state = self.state
        # The batch's JSON holds each line's JSON once: its size plus each entry's envelope is
        # what `_output` would count line by line, without encoding every line again.
        size = len(batch_json.encode()) - 1 + len(lines) * (_TEXT_ENVELOPE - 1)
        if state.output_bytes + size > state.settings.max_output_bytes:
            for line in lines:  # record up to the limit, then fail like a single line would
                self._output({"type": "text", "text": line})
            return
        state.output_bytes += size
        state.output.extend({"type": "text", "text": line} for line in lines)

    def _output(self, item: dict[str, Any]) -> None:
        state = self.state
        size = len(json.dumps(item, ensure_ascii=False).encode()) + 1
        if state.output_bytes + size > state.settings.max_output_bytes:
            state.output_exceeded = True
            state.output_refused_bytes = size
            raise HostCallError(output_too_large(state))
        state.output_bytes += size
        state.output.append(item)

    # ---- asynchronous requests ----------------------------------------------------------------

    def on_request(self, request_id: int, op: str, payload_json: str) -> tuple[bool, str] | None:
        """`search` and `describe` settle at once; `call`/`ns`/`timer`/`yield` stay pending."""
        payload = json.loads(payload_json)
        if op == "search":
            return self._search(payload)
        if op == "describe":
            return self._describe(payload)
        if op == "call":
            return self._call(request_id, payload, len(payload_json))
        if op == "timer":
            return self._timer(request_id, payload)
        if op == "yield":
            self.state.yield_request = (request_id, payload.get("reason"))
            return None
        if op == "ns":
            return self._namespace(request_id, payload)
        return False, f"unknown bridge operation {op!r}"

    def _search(self, payload: dict[str, Any]) -> tuple[bool, str]:
        state = self.state
        limit = payload.get("limit")
        if limit is None:
            limit = state.settings.search_default_limit
        elif (
            isinstance(limit, bool)
            or not isinstance(limit, int | float)
            or limit < 1
            or (isinstance(limit, float) and not limit.is_integer())
        ):
            return False, "limit must be a positive integer."
        limit = min(int(limit), state.settings.max_search_limit)
        state.catalog.counters.search += 1
        hits = state.catalog.search(str(payload.get("query", "")), limit)
        return True, json.dumps([e.compact() for e in hits], ensure_ascii=False)

    def _describe(self, payload: dict[str, Any]) -> tuple[bool, str]:
        try:
            entry = self.state.catalog.find(str(payload.get("ref", "")))
        except CatalogLookupError as exc:
            return False, str(exc)
        self.state.catalog.counters.describe += 1
        return True, json.dumps(entry.with_schema(), ensure_ascii=False)

    def _call(
        self, request_id: int, payload: dict[str, Any], payload_chars: int
    ) -> tuple[bool, str] | None:
        try:
            entry = self.state.catalog.find(str(payload.get("ref", "")))
        except CatalogLookupError as exc:
            return False, str(exc)
        # The input is part of the payload: a small payload needs no size check by encoding.
        small = payload_chars * _DUMPS_GROWTH <= MAX_INPUT_BYTES
        return self._record(request_id, entry, payload.get("input"), kind="call", small=small)

    def _timer(self, request_id: int, payload: Any) -> tuple[bool, str] | None:
        ms = payload.get("ms") if isinstance(payload, dict) else None
        if isinstance(ms, bool) or not isinstance(ms, int | float):
            return False, "timer delay must be a number of milliseconds"
        problem = self.state.timers.add(request_id, str(payload.get("token", "")), ms)
        return None if problem is None else (False, problem)

    def _namespace(self, request_id: int, payload: dict[str, Any]) -> tuple[bool, str] | None:
        path = str(payload.get("path", ""))
        target = self.state.namespace_targets.get(path)
        if target is None:
            # Paths come from guest memory, which guest code can forge; only declared ones work.
            return False, f"unknown namespace function {path!r}"
        try:
            entry, tool_input, kind = target.resolve(payload.get("args") or [])
        except ValueError as exc:
            return False, str(exc)
        return self._record(request_id, entry, tool_input, kind=kind)

    def _record(
        self, request_id: int, entry: Any, tool_input: Any, *, kind: str, small: bool = False
    ) -> tuple[bool, str] | None:
        state = self.state
        if tool_input is None:
            tool_input = {}
        if not isinstance(tool_input, dict):
            return False, f"{entry.name} takes one object argument, got {type(tool_input).__name__}"
        if not small and len(json.dumps(tool_input)) > MAX_INPUT_BYTES:
            return False, f"input for {entry.name} is larger than {MAX_INPUT_BYTES} bytes"
        settings = state.settings
        cap = settings.max_pending_tool_calls + settings.max_queued_tool_calls
        if state.overflow or state.outstanding() >= cap:
            state.overflow = True
            return False, (
                f"too many pending tool calls (at most {cap}: {settings.max_pending_tool_calls} "
                f"running and {settings.max_queued_tool_calls} queued): await some calls "
                "before starting more"
            )
        call = NestedCall(
            request_id=request_id,
            entry=entry,
            input=tool_input,
            kind=kind,
            call_id=state.next_call_id(entry.name),
            parent_call_id=state.parent_call_id,
        )
        lane = None if state.handoff is None else state.handoff.quick
        if lane is not None:  # a quick tool answers here, on the worker (`codemode.quick`)
            reply: tuple[bool, str] | Sent | None = lane.run(call)
            if isinstance(reply, Sent):  # sent from here; the worker collects the answer
                return None
            if reply is not None:
                return reply
        state.new_calls.append(call)
        return None
