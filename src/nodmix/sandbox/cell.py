"""`Cell`: one guest program in one VM, with the generic host bridge, limits and snapshots.

Lifecycle (all methods are synchronous and run guest code on the calling thread):

```
cell = Cell.boot(setup_script, handler, limits=...)     # or Cell.restore(snapshot, handler)
outcome = cell.run(source)                               # Completed | Failed | Pending
while isinstance(outcome, Pending):
    ...host work...; cell.deliver(request_id, ok, text)  # queue results
    outcome = cell.pump()                                # drain jobs, re-evaluate
    # or: blob = cell.snapshot(); cell.close(); later Cell.restore(blob, handler) + deliver
```

A Completed or Failed outcome is final and frees the VM at once. A cell that is dropped while
suspended should be `close()`d (or used as a context manager) to free its memory promptly.
A cell is thread-confined: it may move between threads, but a second concurrent (or
re-entrant, from a handler) use raises `SandboxError`.
"""

from __future__ import annotations

import functools
from typing import Final

from nodmix.errors import SandboxError
from nodmix.sandbox import memimage, templates
from nodmix.sandbox import snapshot as snapshot_format
from nodmix.sandbox.base import HostHandler, SandboxLimits, SnapshotError
from nodmix.sandbox.bootstate import Probe
from nodmix.sandbox.bridge import CALL_FUNCTION, REQUEST_FUNCTION, Bridge
from nodmix.sandbox.cellstep import VM_FAILURES, CellBase
from nodmix.sandbox.prelude import PRELUDE, PRELUDE_FILENAME, strict_setup
from nodmix.sandbox.runtime import QuickJSRuntime, get_runtime
from nodmix.sandbox.vm import VM
from nodmix.sandbox.vmcode import eval_cached

#: The same setup script boots every cell: build its strict form (the bytecode cache key) once,
#: so each boot neither rebuilds nor re-hashes it.
_strict_setup: Final = functools.lru_cache(maxsize=16)(strict_setup)


class Cell(CellBase):
    """One VM running one guest program; see the module docstring for the lifecycle."""

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def boot(
        cls,
        setup_script: str | None,
        handler: HostHandler,
        *,
        limits: SandboxLimits | None = None,
        runtime: QuickJSRuntime | None = None,
    ) -> Cell:
        """A fresh VM with the bridge installed and `setup_script` run.

        The VM is a new wasm instance holding a copy of this setup's boot template (booted
        once per process for each distinct set of answers the setup gets from `handler`, see
        `templates.py`); a setup that cannot be templated runs in the new VM itself.

        Args:
            setup_script: JS source of a function expression, e.g.
                `(cap) => { Object.defineProperty(globalThis, 'tools', {...}) }`. It receives
                the frozen capability `{call, request, requestJson, stringify, tooDeep}` and
                runs (in strict mode) before any user code. Guest code can never reach the
                capability unless the script exposes it. Keep it constant: it is compiled once
                per process and cached as bytecode; pass per-run data through the handler
                instead.
            handler: Receives the guest's calls and requests.
            limits: Resource limits (defaults: `SandboxLimits()`).
            runtime: The runtime to use (default: the process-wide `get_runtime()`).

        Raises:
            RuntimeUnavailableError: The QuickJS-WASI runtime is not installed.
            SandboxError: The VM could not start or the setup script failed.
        """
        runtime = runtime or get_runtime()
        limits = limits or SandboxLimits()
        template, boot_handler = templates.acquire(
            runtime, setup_script, handler, cls._booter(setup_script, runtime, limits)
        )
        if template is not None and template.fits(limits):
            cell = cls(template.new_vm(limits), Bridge(handler), "cell.js")
            cell._settle, cell._finish, cell._describe = template.handles
            cell._template = template
            return cell
        cell = cls._boot(setup_script, boot_handler, limits, runtime, None)
        cell._bridge.handler = handler  # the setup's answers are replayed only while it runs
        return cell

    @classmethod
    def _boot(
        cls,
        setup_script: str | None,
        handler: HostHandler,
        limits: SandboxLimits,
        runtime: QuickJSRuntime,
        probe: Probe | None,
    ) -> Cell:
        vm = VM(runtime, limits, probe=probe)
        cell = cls(vm, Bridge(handler), "cell.js")
        try:
            with cell._step():
                cell._install_bridge(setup_script)
        except VM_FAILURES as exc:
            failure = cell._failure(exc)
            cell.close()
            raise SandboxError(f"sandbox setup failed: {failure.message}") from None
        cell._used = 0.0  # the trusted setup is not charged to the guest's budget
        return cell

    @classmethod
    def _booter(
        cls, setup_script: str | None, runtime: QuickJSRuntime, limits: SandboxLimits
    ) -> templates.Booter:
        def boot(handler: HostHandler, probe: Probe) -> tuple[VM, templates.Handles]:
            cell = cls._boot(setup_script, handler, limits, runtime, probe)
            return cell._vm, (cell._settle, cell._finish, cell._describe)

        return boot

    @classmethod
    def restore(
        cls,
        blob: bytes,
        handler: HostHandler,
        *,
        limits: SandboxLimits | None = None,
        runtime: QuickJSRuntime | None = None,
        setup_script: str | None = None,
    ) -> Cell:
        """Rebuild a cell from `snapshot()` bytes in a fresh VM, with fresh limits.

        Host callbacks are re-attached by their stable names; the guest's pending promises,
        closures and globals are exactly as they were. Snapshots are trusted input: only
        restore bytes this process produced (see `nodmix.sandbox.snapshot`).

        A snapshot holds only what differs from the boot template its cell was copied from.
        When this process does not have that template (after a restart), it is booted again
        from `setup_script`, asking `handler` what the setup asks, and must come out the same.

        Raises:
            SnapshotError: Malformed, from another build, larger than the memory limit, or its
                boot template cannot be rebuilt here.
            RuntimeUnavailableError: The QuickJS-WASI runtime is not installed.
        """
        runtime = runtime or get_runtime()
        limits = limits or SandboxLimits()
        cap = limits.memory_bytes + limits.memory_headroom_bytes
        decoded = snapshot_format.decode(blob, build_id=runtime.build_id, max_memory=cap)
        state = snapshot_format.CellState.unpack(decoded.extra)
        boxes = [state.settle, state.finish, state.describe, state.promise]
        boxes.extend(box for pair in state.rejections for box in pair)
        if max(boxes) + 8 > decoded.size:  # (a JSValue box holds 8 bytes)
            raise SnapshotError("corrupt snapshot metadata")  # handles are addresses in memory
        booter = cls._booter(setup_script, runtime, limits)
        template = templates.for_snapshot(
            decoded.base_digest, runtime, setup_script, handler, booter
        )
        try:
            if template is None:
                start = decoded.start(memimage.fresh_base(runtime))
            else:
                start = decoded.start(template.base, template.dictionary)
            vm = VM(runtime, limits, start)
        except SandboxError as exc:
            raise SnapshotError(str(exc)) from None
        cell = cls(vm, Bridge(handler, state.outstanding), state.filename)
        cell._settle, cell._finish, cell._describe = state.settle, state.finish, state.describe
        cell._promise = state.promise
        cell._template = template
        if state.rejections or state.rejections_dropped:
            vm.rejections.restore(vm, state.rejections, state.rejections_dropped)
        return cell

    def _install_bridge(self, setup_script: str | None) -> None:
        vm = self._vm
        call_fn = vm.new_host_function(CALL_FUNCTION)
        request_fn = vm.new_host_function(REQUEST_FUNCTION)
        factory = setup = bridge = 0
        try:
            factory = eval_cached(vm, PRELUDE, PRELUDE_FILENAME)
            if setup_script:
                setup = eval_cached(vm, _strict_setup(setup_script), "<setup>")
            bridge = vm.call(factory, call_fn, request_fn, setup or vm.undefined)
            self._settle, self._finish, self._describe = (vm.item(bridge, i) for i in range(3))
        finally:
            vm.free(call_fn, request_fn, factory, bridge, setup)

    def snapshot(self) -> bytes:
        """Serialize the whole VM (zstd-1) with the bridge state; see `snapshot.py`.

        Raises:
            SandboxError: The cell is finished or dead.
        """
        if self._final is not None:
            raise SandboxError("cannot snapshot a finished cell")
        self._check_open()
        vm = self._vm
        state = snapshot_format.CellState(
            self._settle,
            self._finish,
            self._describe,
            self._promise,
            self.outstanding,
            self._filename,
            tuple(vm.rejections.kept.values()),
            vm.rejections.dropped,
        )
        extra = state.pack()
        template = self._template
        build_id = self._vm.runtime.build_id
        with self._step():
            self._bridge.release_spare(self._vm)
            image = self._vm.capture()
            if template is None:  # booted without a template: relative to a fresh instance
                base = memimage.fresh_base(self._vm.runtime)
                return snapshot_format.encode(image, build_id=build_id, base=base, extra=extra)
            return snapshot_format.encode(
                image,
                build_id=build_id,
                base=template.base,
                base_digest=template.digest,
                forced=template.forced,
                dictionary=template.dictionary,
                extra=extra,
            )
