"""Boot templates: one booted VM per (runtime, setup script, setup replies), copied into each cell.

Booting a cell evaluates the prelude and the embedding's setup script, which may ask its
handler for data (`call("boot")` in code mode). A template is that booted state, captured once
per process: a new cell is a fresh wasm instance whose memory is the template's pages written
over a fresh instance's memory (`memimage`), never a shared or reused instance, so nothing a
cell does reaches another. Snapshots store only the pages that differ from their template.

The setup's crossings are part of the key: to pick a template, the host functions the setup
would call are asked the same questions in the same order (`Crossing`) and a template is used
only if every answer matches. A setup that makes a request, or whose boots differ in a way
`bootstate` cannot explain, is not templated: such cells boot as before (logged once).

Each template is booted twice with different clocks and entropy, and the two memories are
compared (`bootstate.explain`) so every clock- or entropy-derived byte is known and refreshed
in each copy. Its `digest` (a sha256 of the memory with those bytes zeroed) names it in
snapshots; another process rebuilds the template from the same setup script and answers and
checks the digest before restoring onto it.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import zstandard

from nodmix.errors import SandboxError
from nodmix.sandbox import bootstate, memimage
from nodmix.sandbox.base import HostHandler, SandboxLimits, SnapshotError
from nodmix.sandbox.crossings import Crossing, Replay, ask
from nodmix.sandbox.runtime import QuickJSRuntime
from nodmix.sandbox.vm import VM
from nodmix.sandbox.vmcode import bytecode_compiles
from nodmix.sandbox.vmstate import VMStart

log = logging.getLogger("nodmix.sandbox")

#: Templates kept per process (each holds its ~50 changed pages, ~0.2 MB, and a compression
#: dictionary of them, ~1 MB with zstd's precomputed tables).
MAX_TEMPLATES: Final = 8
#: The second probe boot's clocks run this far ahead of the real ones (~3.4 hours, odd ns).
_SHIFT_NS: Final = 12_345_678_901_234

Handles = tuple[int, int, int]
#: Boots a VM with the prelude and setup installed: (handler, probe) -> (vm, bridge handles).
Booter = Callable[[HostHandler, bootstate.Probe], tuple[VM, Handles]]


@dataclass(eq=False)
class Template:
    """A booted VM's state, ready to be copied into new cells (see the module docstring)."""

    runtime: QuickJSRuntime
    setup_script: str | None
    crossings: tuple[Crossing, ...]
    start: VMStart
    base: memimage.PageBase
    handles: Handles
    fixups: tuple[bootstate.Fixup, ...]
    digest: bytes
    dictionary: zstandard.ZstdCompressionDict
    forced: frozenset[int] = field(default_factory=frozenset)

    def new_vm(self, limits: SandboxLimits) -> VM:
        """A fresh VM holding a copy of the template, with its own clock origin and PRNG."""
        vm = VM(self.runtime, limits, self.start)
        for offset, data in bootstate.refresh(self.fixups, vm.clock_ns(bootstate.MONOTONIC)):
            vm.mem.write(offset, data)
        return vm

    def fits(self, limits: SandboxLimits) -> bool:
        """Whether a copy fits `limits`' linear memory cap."""
        return self.start.pages.size <= limits.memory_bytes + limits.memory_headroom_bytes


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: OrderedDict[bytes, Template] = OrderedDict()
        self.refused: set[tuple[int, str | None]] = set()

    def candidates(self, runtime: QuickJSRuntime, setup: str | None) -> list[Template]:
        with self.lock:
            return [
                t
                for t in reversed(self.items.values())
                if t.runtime is runtime and t.setup_script == setup
            ]

    def find(self, digest: bytes) -> Template | None:
        with self.lock:
            found = self.items.get(digest)
            if found is not None:
                self.items.move_to_end(digest)
            return found

    def add(self, template: Template) -> Template:
        with self.lock:
            kept = self.items.setdefault(template.digest, template)
            self.items.move_to_end(template.digest)
            while len(self.items) > MAX_TEMPLATES:
                self.items.popitem(last=False)
            return kept

    def refuse(self, runtime: QuickJSRuntime, setup: str | None, why: str) -> None:
        with self.lock:
            key = (id(runtime), setup)
            if key in self.refused:
                return
            self.refused.add(key)
        log.info("sandbox cells for this setup boot without a template: %s", why)

    def is_refused(self, runtime: QuickJSRuntime, setup: str | None) -> bool:
        with self.lock:
            return (id(runtime), setup) in self.refused

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.refused.clear()


_cache = _Cache()


def clear() -> None:
    """Forget every template (tests; a new runtime build)."""
    _cache.clear()


def find(digest: bytes) -> Template | None:
    """The template with this digest, if this process has it."""
    return _cache.find(digest)


def acquire(
    runtime: QuickJSRuntime, setup: str | None, handler: HostHandler, boot: Booter
) -> tuple[Template | None, HostHandler]:
    """The template for `setup` and the answers `handler` gives, built on first use.

    Returns:
        The template (None: boot this cell without one), and the handler to boot it with: it
        answers the calls already asked of `handler` without asking again.
    """
    if _cache.is_refused(runtime, setup):
        return None, handler
    candidates = _cache.candidates(runtime, setup)
    asked: list[Crossing] = []
    while candidates:
        step = len(asked)
        done = [t for t in candidates if len(t.crossings) == step]
        if done:
            found = _cache.find(done[0].digest) or done[0]
            return found, Replay(asked, handler, templating=False)
        nxt = candidates[0].crossings[step]
        try:
            reply = ask(handler, nxt.op, nxt.payload)
        except Exception:  # a handler bug: boot as before, where the guest's call reports it
            return None, Replay(asked, handler, templating=False)
        asked.append(Crossing(nxt.op, nxt.payload, reply))
        candidates = [t for t in candidates if t.crossings[step] == asked[-1]]
    replay = Replay(asked, handler)
    template = build(runtime, setup, replay, boot)
    return template, Replay(replay.crossings, handler, templating=False)


def for_snapshot(
    digest: bytes | None,
    runtime: QuickJSRuntime,
    setup: str | None,
    handler: HostHandler,
    boot: Booter,
) -> Template | None:
    """The template a snapshot names (None for a fresh-instance base), rebuilt from `setup`
    when this process does not have it.

    Raises:
        SnapshotError: It is not here and cannot be rebuilt identically.
    """
    if digest is None or digest == bytes(32):
        return None
    found = find(digest)
    if found is None and setup is None:
        raise SnapshotError(
            "the snapshot is stored relative to a boot template this process does not "
            "have; restore it with the setup script its cell was booted with"
        )
    if found is None:
        found, _ = acquire(runtime, setup, handler, boot)
    if found is None or found.digest != digest:
        raise SnapshotError(
            "the snapshot's boot template cannot be rebuilt: the setup script or the "
            "answers it gets have changed"
        )
    return found


def build(
    runtime: QuickJSRuntime, setup: str | None, replay: Replay, boot: Booter
) -> Template | None:
    """Boot a template twice and keep it if every difference is explained (else None)."""
    try:
        first, probe_a = _probe_boot(replay, bootstate.Probe(), boot)
        if replay.unfit:
            _cache.refuse(runtime, setup, "the setup makes requests or changes between boots")
            return None
        crossings = list(replay.crossings)
        again = Replay(crossings, None)
        second, probe_b = _probe_boot(again, bootstate.Probe(_SHIFT_NS), boot)
        if again.unfit or again.next != len(crossings):
            _cache.refuse(runtime, setup, "the setup's calls change between boots")
            return None
    except SandboxError:
        return None  # the fallback boot reports the failure
    template = _compare(runtime, setup, tuple(crossings), (first, probe_a), (second, probe_b))
    return _cache.add(template) if template is not None else None


@dataclass(frozen=True, slots=True)
class _Boot:
    memory: bytes
    start: tuple[int, int, int, int]
    handles: Handles


def _probe_boot(
    handler: Replay, probe: bootstate.Probe, boot: Booter
) -> tuple[_Boot, bootstate.Probe]:
    # A boot that compiled a script allocates differently: boot again with the cache warm.
    for _ in range(3):
        compiles = bytecode_compiles()
        vm, handles = boot(handler, probe)
        try:
            with vm.entry(vm.limits.timeout):
                vm.x.qjs_set_memory_limit(0)  # limits are set again in every copy
                vm.x.qjs_set_max_stack_size(0)
                image = vm.capture()
                captured = _Boot(
                    bytes(image.memory),
                    (image.stack_pointer, image.runtime_ptr, image.context_ptr, image.scratch_ptr),
                    handles,
                )
        finally:
            vm.close()
        if bytecode_compiles() == compiles:
            return captured, probe
        probe.readings.clear()
        probe.entropy.clear()
        handler.next = 0  # the same answers again, now all known
    raise SandboxError("the boot scripts keep compiling")


def _compare(
    runtime: QuickJSRuntime,
    setup: str | None,
    crossings: tuple[Crossing, ...],
    a: tuple[_Boot, bootstate.Probe],
    b: tuple[_Boot, bootstate.Probe],
) -> Template | None:
    boot_a, probe_a = a
    boot_b, probe_b = b
    if boot_a.start != boot_b.start or boot_a.handles != boot_b.handles:
        _cache.refuse(runtime, setup, "two boots laid out memory differently")
        return None
    if len(boot_a.memory) != len(boot_b.memory):
        _cache.refuse(runtime, setup, "two boots grew memory differently")
        return None
    sp = boot_a.start[0]
    fixups, unexplained = bootstate.explain(
        boot_a.memory, boot_b.memory, probe_a, probe_b, floor=sp
    )
    if unexplained is not None:
        _cache.refuse(
            runtime, setup, f"boot state at offset {unexplained} depends on the clock or entropy"
        )
        return None
    fresh = memimage.fresh_memory(runtime)
    memory = bytearray(boot_a.memory)
    memory[:sp] = fresh[:sp]  # the stack below the resting stack pointer is dead
    pages = memimage.PageBase(fresh, {}).changed(memory)
    base = memimage.PageBase(fresh, pages)
    start = VMStart(memimage.PageRuns.from_pages(pages, len(memory)), *boot_a.start)
    masked = _masked(memory, fixups)
    return Template(
        runtime=runtime,
        setup_script=setup,
        crossings=crossings,
        start=start,
        base=base,
        handles=boot_a.handles,
        fixups=tuple(fixups),
        digest=_digest(runtime, masked, pages, boot_a),
        dictionary=_dictionary(masked, pages),
        forced=frozenset(i for f in fixups for i in _pages_of(f)),
    )


def _pages_of(fixup: bootstate.Fixup) -> range:
    first = fixup.offset // memimage.PAGE
    return range(first, (fixup.offset + fixup.size - 1) // memimage.PAGE + 1)


def _masked(memory: bytearray, fixups: list[bootstate.Fixup]) -> bytearray:
    # The memory with its clock- and entropy-derived bytes zeroed: the same in every process.
    masked = bytearray(memory)
    for fixup in fixups:
        masked[fixup.offset : fixup.offset + fixup.size] = bytes(fixup.size)
    return masked


def _digest(
    runtime: QuickJSRuntime, masked: bytearray, pages: dict[int, bytes], boot: _Boot
) -> bytes:
    # Every other page holds the fresh instance's content, which the build id pins.
    h = hashlib.sha256(runtime.build_id)
    h.update(struct.pack("<8I", len(masked), *boot.start, *boot.handles))
    for index in sorted(pages):
        h.update(struct.pack("<I", index))
        h.update(masked[index * memimage.PAGE : (index + 1) * memimage.PAGE])
    return h.digest()


def _dictionary(masked: bytearray, pages: dict[int, bytes]) -> zstandard.ZstdCompressionDict:
    # Snapshot pages are mostly template pages with a few changes: compressing them against
    # the template's own (masked) pages finds those matches.
    content = b"".join(
        bytes(masked[i * memimage.PAGE : (i + 1) * memimage.PAGE]) for i in sorted(pages)
    )
    dictionary = zstandard.ZstdCompressionDict(content, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    dictionary.precompute_compress(level=1)
    return dictionary
