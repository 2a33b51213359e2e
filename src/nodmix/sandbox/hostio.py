"""The host side of the wasm boundary: imports called from wasm, and linear-memory access.

- `define_import`: host functions called from wasm through an unchecked raw callback, which
  skips wasmtime-py's per-call `Caller`/`Val` wrapping (the bridge's hot path).
- `LinearMemory`: bounds-checked reads and writes of a memory with two raw calls.
- `I32Global`: an i32 global (the stack pointer) read and written with one raw call each
  (wasmtime-py's `Global.set_value` re-derives the global's type and boxes the value).

Like `wasm.py`, this uses the private `wasmtime._ffi` module when available and falls back to
the public API otherwise.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any, Final

import wasmtime

from nodmix.sandbox import wasm


class OutOfBounds(Exception):
    """A pointer from inside the sandbox does not lie within its linear memory."""


class LinearMemory:
    """Bounds-checked access to a wasm memory. Pointers come from inside the sandbox, so none
    may ever address host memory outside the current linear memory.
    """

    __slots__ = ("_base", "_ctx", "_memory", "_ref", "_size", "_store")

    def __init__(self, memory: wasmtime.Memory, store: wasmtime.Store) -> None:
        self._memory = memory
        self._store = store
        self._ctx = ctypes.cast(store._context(), ctypes.c_void_p).value if wasm.FAST_PATH else None
        self._ref = ctypes.addressof(memory._memory) if wasm.FAST_PATH else None
        self._base, self._size = 0, -1

    def bounds(self) -> tuple[int, int]:
        """(host address, size in bytes). Both change when memory grows: never cache them
        across a call into wasm.
        """
        if wasm.FAST_PATH:
            # Only growing can move a memory (it never shrinks): while the size is the one
            # seen last, so is the address, and one raw call is enough.
            size = wasm.raw_memory_size(self._ctx, self._ref)
            if size != self._size:
                self._base, self._size = wasm.raw_memory_data(self._ctx, self._ref), size
            return self._base, size
        base = ctypes.addressof(self._memory.data_ptr(self._store).contents)
        return base, self._memory.data_len(self._store)

    def address(self, ptr: int, size: int) -> int:
        """Host address of `[ptr, ptr + size)` after checking it lies inside the memory.

        Raises:
            OutOfBounds: The range is not inside linear memory.
        """
        base, length = self.bounds()
        if ptr < 0 or size < 0 or ptr + size > length:
            raise OutOfBounds(ptr, size)
        return int(base) + ptr

    def read(self, ptr: int, size: int) -> bytes:
        """Copy `size` bytes starting at `ptr`."""
        return ctypes.string_at(self.address(ptr, size), size)

    def write(self, ptr: int, data: bytes) -> None:
        """Copy `data` to `ptr`."""
        ctypes.memmove(self.address(ptr, len(data)), data, len(data))

    def size(self) -> int:
        """Current size in bytes."""
        return self.bounds()[1]

    def grow_to(self, size: int) -> None:
        """Grow (never shrink) to at least `size` bytes."""
        current = self.size()
        if size > current:
            self._memory.grow(self._store, -(-(size - current) // 65536))


class I32Global:
    """Raw access to one i32 global of a store."""

    __slots__ = ("_ctx", "_global", "_ref", "_store")

    def __init__(self, glob: wasmtime.Global, store: wasmtime.Store) -> None:
        self._global = glob
        self._store = store
        self._ctx = store._context() if wasm.FAST_PATH else None
        self._ref = ctypes.byref(glob._global) if wasm.FAST_PATH else None

    def get(self) -> int:
        """The current value."""
        if not wasm.FAST_PATH:
            return int(self._global.value(self._store))
        raw = wasm.ffi.wasmtime_val_t()
        wasm.ffi.wasmtime_global_get(self._ctx, self._ref, ctypes.byref(raw))
        return int(raw.of.i32)

    def set(self, value: int) -> None:
        """Store `value` (the global must be a mutable i32).

        Raises:
            wasmtime.WasmtimeError: The global is immutable or not an i32.
        """
        if not wasm.FAST_PATH:
            self._global.set_value(self._store, value)
            return
        raw = wasm.ffi.wasmtime_val_t(kind=wasm.ffi.WASMTIME_I32.value)
        raw.of.i32 = value
        error = wasm.ffi.wasmtime_global_set(self._ctx, self._ref, ctypes.byref(raw))
        if error:
            raise wasmtime.WasmtimeError._from_ptr(error)


#: How each kind sits in a 16-byte raw slot, read (arguments) and written (the result; i32
#: and i64 results wrap like ctypes' integer fields do).
_RAW_SLOTS: Final = {"i": "i12x", "I": "q8x", "d": "d8x"}
_RAW_RESULTS: Final = {"i": "I", "I": "Q", "d": "d"}
_RAW_MASKS: Final = {"i": 0xFFFFFFFF, "I": 0xFFFFFFFFFFFFFFFF}
#: The unchecked callback type with every argument as a plain integer (the values pointer
#: included); cast to wasmtime's own prototype when it is registered.
_RAW_CALLBACK: Final = ctypes.CFUNCTYPE(
    ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
)
_VALTYPES: Final = {"i": wasmtime.ValType.i32, "I": wasmtime.ValType.i64, "d": wasmtime.ValType.f64}
_keepalive: list[object] = []  # raw callbacks must outlive every linker that uses them


def define_import(
    linker: wasmtime.Linker,
    module: str,
    name: str,
    params: str,
    results: str,
    func: Callable[..., Any],
) -> None:
    """Define a store-independent import; types are spelled like "iIi" (i=i32, I=i64, d=f64).

    `func` receives native Python values. It should never raise: a `BaseException` is turned
    into a trap of the calling store and re-raised (per thread) from the outer `fast_func` call.
    """
    ty = wasmtime.FuncType([_VALTYPES[c]() for c in params], [_VALTYPES[c]() for c in results])
    if not wasm.FAST_PATH:
        linker.define_func(module, name, ty, func)
        return
    # The arguments and the result live in 16-byte `wasmtime_val_raw_t` slots: read them all
    # with one struct unpack instead of a ctypes union object per argument.
    unpack = struct.Struct("<" + "".join(_RAW_SLOTS[c] for c in params)).unpack if params else None
    size = 16 * len(params)
    result = struct.Struct("<" + _RAW_RESULTS[results]).pack if results else None
    mask = _RAW_MASKS.get(results, 0)
    string_at, memmove = ctypes.string_at, ctypes.memmove

    def raw(_env: int, _caller: int, values: int, _count: int) -> int:
        try:
            value = func(*unpack(string_at(values, size))) if unpack is not None else func()
            if result is not None:
                data = result(value & mask if mask else value)
                memmove(values, data, len(data))
            return 0
        except BaseException as exc:  # must not unwind through wasm
            wasm.thread_state.exception = exc
            message = b"host function failed"
            trap = wasm.ffi.wasmtime_trap_new(message, len(message))
            return int(ctypes.cast(trap, ctypes.c_void_p).value or 0)

    callback = _RAW_CALLBACK(raw)
    _keepalive.append(callback)
    no_finalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()  # a NULL function pointer
    mod, fn = module.encode(), name.encode()
    error = wasm.ffi.wasmtime_linker_define_func_unchecked(
        linker.ptr(),
        mod,
        len(mod),
        fn,
        len(fn),
        ty.ptr(),
        ctypes.cast(callback, wasm.ffi.wasmtime_func_unchecked_callback_t),
        None,
        no_finalizer,
    )
    if error:
        raise wasmtime.WasmtimeError._from_ptr(error)
