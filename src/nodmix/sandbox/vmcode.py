"""Running scripts in a VM: plain evaluation, and trusted scripts through a process-wide
bytecode cache (compiled once per process and build, loaded by every later VM).

Like every use of a VM, these run inside `with vm.entry(seconds):` (see `vm.py`).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Final

from nodmix.sandbox.vm import SCRATCH_LEN, U32, VM
from nodmix.sandbox.vmstate import GuestThrow

EVAL_GLOBAL: Final = 0
# QuickJS constants for `_compile_stripped`: JS_EVAL_FLAG_COMPILE_ONLY, the tag of
# JS_EXCEPTION (a JSValue is NaN-boxed in 64 bits here), and JS_WRITE_OBJ_BYTECODE |
# JS_WRITE_OBJ_STRIP_DEBUG (which drops the source text too).
_COMPILE_ONLY: Final = 1 << 5
_TAG_EXCEPTION: Final = 6
_WRITE_STRIPPED: Final = 1 | 1 << 5


class BytecodeCache:
    """A small thread-safe LRU of compiled QuickJS bytecode, keyed by (build, name, source)."""

    def __init__(self, size: int) -> None:
        self.misses = 0
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[bytes, str, str], bytes] = OrderedDict()

    def get(self, key: tuple[bytes, str, str]) -> bytes | None:
        """The cached bytecode, or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: tuple[bytes, str, str], value: bytes) -> None:
        """Remember `value` (a compile that missed), evicting the least recently used entries."""
        with self._lock:
            self.misses += 1
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_bytecode = BytecodeCache(16)


def bytecode_compiles() -> int:
    """How many scripts this process has compiled to bytecode so far (a boot that compiles
    allocates differently from one that only loads cached bytecode)."""
    return _bytecode.misses


def eval_script(vm: VM, code: str, filename: str) -> int:
    """Evaluate a global script; returns the completion value handle.

    Raises:
        GuestThrow: The script threw (including syntax errors).
    """
    with _source(vm, code, filename) as (code_ptr, size, name_ptr):
        return vm.checked(vm.x.qjs_eval(code_ptr, size, name_ptr, EVAL_GLOBAL))


def eval_cached(vm: VM, code: str, filename: str) -> int:
    """Like `eval_script`, for trusted scripts evaluated in every VM (the prelude, setup
    scripts).

    The script is compiled to QuickJS bytecode once per process and build; later VMs only
    load the bytecode, which is ~4x cheaper than parsing. Bytecode is trusted input to
    QuickJS, so only our own compiler output is ever loaded. It carries no debug
    information, so the script's source text never sits in the heap or in snapshots.

    Raises:
        GuestThrow: Compilation or evaluation threw.
    """
    key = (vm.runtime.build_id, filename, code)
    bytecode = _bytecode.get(key)
    if bytecode is None:
        bytecode = _compile_stripped(vm, code, filename)
        _bytecode.put(key, bytecode)
    ptr = vm.alloc_bytes(bytecode)
    try:
        return vm.checked(vm.x.qjs_eval_bytecode(ptr, len(bytecode)))
    finally:
        if not vm.dead:
            vm.x.wasm_free(ptr)


def _compile_stripped(vm: VM, code: str, filename: str) -> bytes:
    # Bytecode without debug information: no source text (which every function would keep
    # for `toString`, ~10 KB of each snapshot) and no line table. Frames of these trusted
    # scripts then print no location; error locations only ever use the guest's own file.
    ctx = vm.x.qjs_get_context_ptr()
    with _source(vm, code, filename) as (code_ptr, size, name_ptr):
        value = vm.x.JS_Eval(ctx, code_ptr, size, name_ptr, EVAL_GLOBAL | _COMPILE_ONLY)
        if (value >> 32) & 0xFFFFFFFF == _TAG_EXCEPTION:
            raise GuestThrow(vm.x.qjs_get_exception())
        len_ptr = vm.scratch + SCRATCH_LEN
        try:
            buf = vm.x.JS_WriteObject(ctx, len_ptr, value, _WRITE_STRIPPED)
        finally:
            vm.x.JS_FreeValue(ctx, value)
        if not buf:
            raise GuestThrow(vm.x.qjs_get_exception())
        bytecode = vm.mem.read(buf, U32.unpack(vm.mem.read(len_ptr, 4))[0])
        vm.x.js_free(ctx, buf)
    return bytecode


@contextlib.contextmanager
def _source(vm: VM, code: str, filename: str) -> Iterator[tuple[int, int, int]]:
    # Source text and filename as NUL-terminated strings in wasm memory, freed afterwards.
    source = code.encode("utf-8", "surrogatepass")
    code_ptr = vm.alloc_bytes(source)
    name_ptr = vm.alloc_bytes(filename.encode("utf-8", "surrogatepass"))
    try:
        yield code_ptr, len(source), name_ptr
    finally:
        if not vm.dead:
            vm.x.wasm_free(code_ptr)
            vm.x.wasm_free(name_ptr)
