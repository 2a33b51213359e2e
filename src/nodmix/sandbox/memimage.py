"""Loading a memory image into a fresh instance by writing only the pages that differ.

A fresh instance's linear memory already holds the module's data segments and zeros
elsewhere. Of a small cell's 1.3 MiB image only ~40 pages differ from that (the QuickJS heap
and a few static pages), and on this kind of VM every page the host touches first costs a
page fault of several microseconds: writing the whole image took ~0.7 ms, writing the pages
that differ ~0.12 ms. The result is byte for byte the image, because the pages left alone
already hold exactly what the image holds.

`PageRuns` is an image reduced to those runs of pages. `PageBase` is what an image is compared
against: a fresh instance's memory, or a boot template's (fresh memory with the template's own
pages laid over it); a snapshot stores only the pages that differ from its base.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Final

import wasmtime

if TYPE_CHECKING:
    from nodmix.sandbox.runtime import QuickJSRuntime

#: Host page size used for the comparison (the fault granularity; wasm pages are 16 of them).
PAGE: Final = 4096
#: `madvise(MADV_POPULATE_WRITE)`: fault a whole range in with one call (Linux 5.14+).
_MADV_POPULATE_WRITE: Final = 23
#: Below this, populating a run in one call is not worth the system call.
_POPULATE_MIN: Final = 8 * PAGE

_fresh_lock = threading.Lock()
_fresh: dict[int, tuple[QuickJSRuntime, bytes]] = {}


def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):  # pragma: no cover - depends on the platform's libc
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_populate = _madvise()


class PageRuns:
    """An image as the runs of pages that differ from a fresh instance's memory.

    Runs are written in order, so a later run may lay its pages over an earlier one's (a
    restore writes its base's pages, then the snapshot's, without merging them first).
    """

    __slots__ = ("runs", "size")

    def __init__(self, runs: list[tuple[int, bytes]], size: int) -> None:
        self.runs = runs
        self.size = size

    @classmethod
    def diff(cls, image: bytes | memoryview, fresh: bytes) -> PageRuns:
        """The runs of `image` that differ from `fresh` (zeros past its end)."""
        data = bytes(image)
        size = len(data)
        runs: list[tuple[int, int]] = []
        limit = len(fresh)
        zero = bytes(PAGE)
        for start in range(0, size, PAGE):
            page = data[start : start + PAGE]
            base = fresh[start : start + PAGE] if start < limit else zero[: len(page)]
            if page != base:
                if runs and runs[-1][1] == start:
                    runs[-1] = (runs[-1][0], start + len(page))
                else:
                    runs.append((start, start + len(page)))
        return cls([(a, data[a:b]) for a, b in runs], size)

    @classmethod
    def from_pages(cls, pages: Mapping[int, bytes], size: int) -> PageRuns:
        """Runs of whole pages given by index (consecutive pages are merged into one run)."""
        runs: list[tuple[int, list[bytes]]] = []
        last = -2
        for index in sorted(pages):
            if index == last + 1:
                runs[-1][1].append(pages[index])
            else:
                runs.append((index * PAGE, [pages[index]]))
            last = index
        return cls([(offset, b"".join(chunks)) for offset, chunks in runs], size)

    def layered(self, runs: list[tuple[int, bytes]]) -> PageRuns:
        """These runs with `runs` written after them (over them where they overlap)."""
        return PageRuns([*self.runs, *runs], self.size)

    @property
    def changed_bytes(self) -> int:
        """How many bytes a load writes."""
        return sum(len(chunk) for _, chunk in self.runs)

    def write(self, base: int, length: int) -> None:
        """Write the runs into a memory at host address `base` of `length` bytes (already
        grown to `size`, and fresh: every other page must still hold its initial content)."""
        if length < self.size:
            raise ValueError("memory smaller than the image")
        for offset, chunk in self.runs:
            if _populate is not None and len(chunk) >= _POPULATE_MIN:
                _populate(base + offset, len(chunk), _MADV_POPULATE_WRITE)  # a hint only
            ctypes.memmove(base + offset, chunk, len(chunk))


class PageBase:
    """A fresh instance's memory with `pages` (index -> page bytes) laid over it."""

    __slots__ = ("_fresh", "_runs", "pages")

    def __init__(self, fresh: bytes, pages: Mapping[int, bytes]) -> None:
        self._fresh = fresh
        self.pages = pages
        self._runs: PageRuns | None = None

    def page(self, index: int) -> bytes:
        """Page `index` of the base (zeros past the fresh memory's end)."""
        found = self.pages.get(index)
        if found is not None:
            return found
        start = index * PAGE
        return self._fresh[start : start + PAGE] if start < len(self._fresh) else _ZERO_PAGE

    def changed(
        self,
        memory: bytes | bytearray | memoryview,
        *,
        floor: int = 0,
        forced: Collection[int] = (),
    ) -> dict[int, bytes]:
        """The pages of `memory` that differ from the base, plus every page in `forced`.
        Pages that end at or below `floor` (a dead stack) are left out."""
        data = bytes(memory)  # one copy; comparing bytes slices is ~3x faster than memoryviews
        out: dict[int, bytes] = {}
        for index in range(len(data) // PAGE):
            start = index * PAGE
            if start + PAGE <= floor and index not in forced:
                continue
            page = data[start : start + PAGE]
            if index in forced or page != self.page(index):
                out[index] = page
        return out

    def runs_with(self, pages: Mapping[int, bytes], size: int) -> PageRuns:
        """The base's own pages overlaid with `pages`, as runs to load into a fresh instance."""
        return self.runs(size).layered(PageRuns.from_pages(pages, size).runs)

    def runs(self, size: int) -> PageRuns:
        """The base's own pages below `size`, as runs to load into a fresh instance of that
        size (joined once per base: every restore from it writes them)."""
        own = self._runs
        if own is None:
            own = self._runs = PageRuns.from_pages(self.pages, 0)
        runs = [(offset, chunk) for offset, chunk in own.runs if offset + len(chunk) <= size]
        if len(runs) < len(own.runs):  # a run that reaches past `size` loses its tail
            runs.extend(
                (offset, chunk[: size - offset])
                for offset, chunk in own.runs
                if offset < size < offset + len(chunk)
            )
        return PageRuns(runs, size)


_ZERO_PAGE: Final = bytes(PAGE)


def fresh_memory(runtime: QuickJSRuntime) -> bytes:
    """The initial linear memory of an instance of `runtime` (computed once per runtime)."""
    found = _fresh.get(id(runtime))
    if found is not None and found[0] is runtime:
        return found[1]
    with _fresh_lock:
        store = wasmtime.Store(runtime.engine)
        try:
            memory = runtime.pre.instantiate(store).exports(store)["memory"]
            assert isinstance(memory, wasmtime.Memory)
            data = bytes(memory.read(store, 0, memory.data_len(store)))
        finally:
            store.close()
        _fresh[id(runtime)] = (runtime, data)  # holds the runtime: its id is never reused
        return data


def fresh_base(runtime: QuickJSRuntime) -> PageBase:
    """A fresh instance's memory as a base (for cells booted without a template)."""
    return PageBase(fresh_memory(runtime), {})
