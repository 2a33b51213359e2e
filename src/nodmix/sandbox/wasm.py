"""Low-level wasmtime glue shared by the QuickJS runtime and the TypeScript transform.

Everything that touches wasmtime's untyped or private API lives here, so `Any` stays contained:

- `shared_engine()`: the one process-wide `Engine` (epoch interruption on, 2 MiB wasm stack) and
  its daemon epoch-ticker thread.
- `Exports` / `fast_func`: lazy export lookup and unchecked calls into wasm. wasmtime-py's
  `instance.exports()` wraps all ~450 exports of quickjs.wasm (~5 ms per instance) and
  `Func.__call__` re-derives the function type on every call (~13 us), so exports are looked
  up by name and called through `wasmtime_func_call_unchecked` with precomputed types
  (pitfalls 1-2).
- `hostio.py` holds the other direction (imports called from wasm) and memory access.

The fast paths use the private `wasmtime._ffi` module (wasmtime is pinned to one major version
in pyproject). If it is missing, everything falls back to the public API: slower, same result.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Final, Protocol

import wasmtime

try:
    from wasmtime import _ffi as _wffi
    from wasmtime._extern import wrap_extern as _wrap_extern
    from wasmtime._func import maybe_raise_last_exn as _maybe_raise_last_exn

    ffi: Any = _wffi
    _call_unchecked: Any = _wffi.dll.wasmtime_func_call_unchecked
    _call_unchecked.restype = ctypes.c_void_p
    _call_unchecked.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t, ctypes.c_void_p]
    # The same entry point without releasing the GIL, for exports that never run guest code
    # and return within microseconds (see `Exports`, `quick`).
    _call_unchecked_gil: Any = ctypes.PYFUNCTYPE(
        ctypes.c_void_p, *[ctypes.c_void_p] * 3, ctypes.c_size_t, ctypes.c_void_p
    )(("wasmtime_func_call_unchecked", _wffi.dll))
    # Our own prototypes (not the shared wasmtime-py ones), returning plain integers.
    raw_memory_data: Any = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        ("wasmtime_memory_data", _wffi.dll)
    )
    raw_memory_size: Any = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)(
        ("wasmtime_memory_data_size", _wffi.dll)
    )
    _RawSlot: Any = _wffi.wasmtime_val_raw_t
    _EXTERN_OF_OFFSET: int = _wffi.wasmtime_extern_t.of.offset
    _EXTERN_FUNC: int = _wffi.WASMTIME_EXTERN_FUNC.value
    FAST_PATH = True
except (ImportError, AttributeError):  # pragma: no cover - depends on the installed wasmtime
    FAST_PATH = False

#: Native stack for wasm code. Never raise it above 2 MiB: wasmtime panics and aborts the whole
#: process when max_wasm_stack exceeds its async stack size, which wasmtime-py cannot set
#: (pitfall 3).
MAX_WASM_STACK: Final = 2 << 20
#: Period of the epoch ticker; wasm deadlines are counted in these ticks.
EPOCH_TICK_SECONDS: Final = 0.01
#: Extra ticks added to every epoch deadline, so ticker jitter never cuts a budget short.
EPOCH_GRACE_TICKS: Final = 2
#: The epoch backstop fires at this multiple of the interrupt deadline (pitfall 5).
EPOCH_BACKSTOP_FACTOR: Final = 1.5

_engine_lock = threading.Lock()
_engine: wasmtime.Engine | None = None


@functools.cache
def wasmtime_version() -> str:
    """The installed wasmtime-py version (part of every compiled-module cache key)."""
    # The dist-info directory name is enough, and much cheaper than importing
    # importlib.metadata (~25 ms, which would land on every cold start).
    site = Path(wasmtime.__file__).resolve().parent.parent
    found = sorted(site.glob("wasmtime-*.dist-info"))
    if len(found) == 1:
        return found[0].name.removeprefix("wasmtime-").removesuffix(".dist-info")
    import importlib.metadata  # pragma: no cover - unusual installs

    try:  # pragma: no cover
        return importlib.metadata.version("wasmtime")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def engine_fingerprint() -> str:
    """A stable description of the engine settings that affect compiled code."""
    return f"wasmtime={wasmtime_version()};epoch=1;max_wasm_stack={MAX_WASM_STACK}"


def _ticker(engine: wasmtime.Engine) -> None:
    # One ticker per process: a deadline of N ticks means roughly N * 10 ms of wall clock.
    while True:
        time.sleep(EPOCH_TICK_SECONDS)
        engine.increment_epoch()


def shared_engine() -> wasmtime.Engine:
    """The process-wide engine, created on first use together with its epoch ticker thread."""
    global _engine
    with _engine_lock:
        if _engine is None:
            config = wasmtime.Config()
            config.epoch_interruption = True
            config.max_wasm_stack = MAX_WASM_STACK
            engine = wasmtime.Engine(config)
            threading.Thread(
                target=_ticker, args=(engine,), name="nodmix-sandbox-epoch", daemon=True
            ).start()
            _engine = engine
        return _engine


def epoch_ticks(seconds: float) -> int:
    """Epoch deadline (in ticks from now) that backs up an interrupt deadline of `seconds`."""
    seconds = max(seconds, 0.0)
    return int(seconds * EPOCH_BACKSTOP_FACTOR / EPOCH_TICK_SECONDS) + EPOCH_GRACE_TICKS


# ---------------------------------------------------------------------------------------------
# Calls into wasm
# ---------------------------------------------------------------------------------------------


class WasmFunc(Protocol):
    """A bound wasm export: call it with the wasm arguments (the store is already bound).

    i32 results come back as `int`; void functions return None (typed `int` for brevity: their
    result is never used) and f64 results as `float`.
    """

    def __call__(self, *args: float) -> int: ...


class _ThreadState(threading.local):
    owner: weakref.ReferenceType[Any] | None = None
    exception: BaseException | None = None


_current = _ThreadState()
#: Per-thread state shared with `hostio`: the current owner and a pending BaseException.
thread_state = _current


def current_owner() -> object | None:
    """The object on whose behalf this thread is executing wasm (see `fast_func`)."""
    ref = _current.owner
    return None if ref is None else ref()


_PACK: Final = {"i32": "i12x", "i64": "q8x", "f32": "f12x", "f64": "d8x"}


class Signature:
    """The raw-call layout of one export, derived from its type once per module."""

    __slots__ = ("pack", "result", "slots")

    def __init__(self, func: wasmtime.Func, store: wasmtime.Store) -> None:
        ty = func.type(store)
        params = [str(p) for p in ty.params]
        results = [str(r) for r in ty.results]
        if len(results) > 1 or any(k not in _PACK for k in params + results):
            raise TypeError("unsupported wasm signature for fast_func")
        self.slots = max(len(params), len(results), 1)
        self.pack = struct.Struct("<" + "".join(_PACK[k] for k in params)) if params else None
        self.result = struct.Struct("<" + _PACK[results[0]][0]) if results else None


#: Per-module caches of export signatures (keyed by export name), see `Exports`.
SignatureCache = dict[str, Signature]


def fast_func(
    item: Any,
    context: int,
    store: wasmtime.Store,
    owner: weakref.ReferenceType[Any],
    signature: Signature,
    *,
    hold_gil: bool = False,
) -> WasmFunc:
    """A function that calls one export through `wasmtime_func_call_unchecked` with
    precomputed types (a closure: no attribute lookups per call).

    The argument/result buffer layout (16-byte `wasmtime_val_raw_t` slots) is derived once
    from the export's real type, so the unchecked call is type-correct. A call that may run
    guest code installs `owner` as this thread's current owner and restores the previous one
    afterwards: that is how the shared import callbacks find the VM that called them, even
    when one VM's callback enters another VM (pitfall 9). The owner is held weakly, so an owner
    holding its exports forms no reference cycle and is freed as soon as it is dropped.
    `hold_gil` exports (see `Exports`) reach no import, so they skip that bookkeeping: a cell
    makes about nine of them per guest tool call.

    The buffer and trap slot are reused across calls. That stays correct if the same export
    is re-entered from a host callback: wasm reads its arguments when it starts and writes its
    result when it returns, and the trap slot is cleared as soon as a trap is taken from it.
    `item` (the `wasmtime_extern_t` an export lookup filled in) owns the wasmtime_func_t the
    call points into (the first member of its union); the store keeps the context alive.
    """
    call = _call_unchecked_gil if hold_gil else _call_unchecked
    current = None if hold_gil else owner
    fn = ctypes.addressof(item) + _EXTERN_OF_OFFSET
    slots = signature.slots
    buf: Any = (_RawSlot * slots)()
    trap = ctypes.c_void_p()
    trap_ref = ctypes.byref(trap)
    pack = signature.pack.pack_into if signature.pack is not None else None
    unpack = signature.result.unpack_from if signature.result is not None else None
    local, keep = _current, (item, store)

    def fast_call(*args: float) -> Any:
        if pack is not None:
            pack(buf, 0, *args)
        if current is None:
            err = call(context, fn, buf, slots, trap_ref)
        else:
            prev = local.owner
            local.owner = current
            try:
                err = call(context, fn, buf, slots, trap_ref)
            finally:
                local.owner = prev
        if err or trap.value:
            failed, trap.value = trap.value, None
            _raise_failure(err, failed)
        return None if unpack is None else unpack(buf, 0)[0]

    fast_call.keep = keep  # type: ignore[attr-defined]
    return fast_call


def _raise_failure(err: int | None, trap: int | None) -> None:
    pending = _current.exception
    if pending is not None:  # a BaseException (e.g. KeyboardInterrupt) inside an import
        _current.exception = None
    if err:
        error_ptr = ctypes.cast(err, ctypes.POINTER(_wffi.wasmtime_error_t))
        error = wasmtime.WasmtimeError._from_ptr(error_ptr)
        raise (pending or error)
    assert trap, "called without an error or a trap"
    trap_obj = wasmtime.Trap._from_ptr(ctypes.cast(trap, ctypes.POINTER(_wffi.wasm_trap_t)))
    _maybe_raise_last_exn()  # only set by wasmtime-py's own callbacks (the slow path)
    if pending is not None:
        raise pending
    raise trap_obj


class _SlowFunc:
    """The public-API fallback for `fast_func` (always with the owner bookkeeping)."""

    __slots__ = ("_func", "_owner", "_store")

    def __init__(
        self, func: wasmtime.Func, store: wasmtime.Store, owner: weakref.ReferenceType[Any]
    ) -> None:
        self._func = func
        self._store = store
        self._owner = owner

    def __call__(self, *args: float) -> Any:
        prev = _current.owner
        _current.owner = self._owner
        try:
            return self._func(self._store, *args)
        finally:
            _current.owner = prev


class Exports:
    """Lazy, cached, owner-bound access to one instance's exports.

    `exports.qjs_eval(...)` looks the export up on first use and caches a bound callable;
    `exports.extern(name)` returns non-function exports (memory, globals). Pass one
    `signatures` dict per module to share the type analysis between instances.

    Calls release the GIL, so other threads (the event loop) run while wasm does. Exports
    named in `quick` keep it instead: they never run guest code and return within
    microseconds, and a thread that gives up the GIL a dozen times per guest tool call pays
    for taking it back from a busy event loop each time.
    """

    def __init__(
        self,
        instance: wasmtime.Instance,
        store: wasmtime.Store,
        owner: object,
        signatures: SignatureCache | None = None,
        quick: frozenset[str] = frozenset(),
    ) -> None:
        self._quick = quick
        self._instance = instance
        self._store = store
        self._owner = weakref.ref(owner)  # the owner usually holds us: no cycle
        self._signatures = signatures if signatures is not None else {}
        self._all: Any = None
        self._context = 0  # the store's context pointer, once a function is bound

    def _lookup(self, name: str) -> Any:
        # The raw `wasmtime_extern_t` of export `name`, or None (fast path only).
        item = _wffi.wasmtime_extern_t()
        raw = name.encode()
        instance = ctypes.byref(self._instance._instance)
        found = _wffi.wasmtime_instance_export_get(
            self._store._context(), instance, raw, len(raw), ctypes.byref(item)
        )
        return item if found else None

    def extern(self, name: str) -> Any:
        """The raw wasmtime object for export `name` (Memory, Global, Func)."""
        value: Any = None
        if FAST_PATH:
            item = self._lookup(name)
            value = None if item is None else _wrap_extern(item)
        else:
            if self._all is None:
                self._all = self._instance.exports(self._store)
            value = self._all.get(name)
        if value is None:
            raise AttributeError(name)
        return value

    def __getattr__(self, name: str) -> WasmFunc:
        bound = self._bind(name, hold_gil=name in self._quick)
        setattr(self, name, bound)  # later lookups skip __getattr__
        return bound

    def releasing(self, name: str) -> WasmFunc:
        """Export `name` bound so that it always releases the GIL (for a `quick` export given
        a large input, whose work then grows with its size)."""
        attr = f"_releasing_{name}"
        bound: WasmFunc | None = self.__dict__.get(attr)
        if bound is None:
            bound = self._bind(name, hold_gil=False)
            setattr(self, attr, bound)
        return bound

    def _bind(self, name: str, *, hold_gil: bool) -> WasmFunc:
        item = self._lookup(name) if FAST_PATH else None
        if item is not None and item.kind == _EXTERN_FUNC:
            # Bound from the raw lookup, without a `Func` wrapper once the signature is known
            # (a cell binds ~16 exports; this halves the cost of each).
            signature = self._signatures.get(name)
            try:
                if signature is None:
                    func: Any = _wrap_extern(item)
                    signature = self._signatures[name] = Signature(func, self._store)
                if not self._context:
                    self._context = ctypes.cast(self._store._context(), ctypes.c_void_p).value or 0
                return fast_func(
                    item, self._context, self._store, self._owner, signature, hold_gil=hold_gil
                )
            except TypeError:
                pass  # an exotic signature: keep the public-API call
        value = self.extern(name)
        if not isinstance(value, wasmtime.Func):
            raise AttributeError(f"export {name!r} is not a function")
        return _SlowFunc(value, self._store, self._owner)


# ---------------------------------------------------------------------------------------------
# Traps
# ---------------------------------------------------------------------------------------------


def trap_is_interrupt(exc: BaseException) -> bool:
    """True when `exc` is the epoch-deadline trap."""
    return isinstance(exc, wasmtime.Trap) and exc.trap_code == wasmtime.TrapCode.INTERRUPT


def trap_summary(exc: BaseException) -> str:
    """A short description of a trap (wasmtime's message ends with a long wasm backtrace)."""
    if isinstance(exc, wasmtime.Trap):
        code = exc.trap_code
        if code is not None:
            return code.name.lower().replace("_", " ")
        lines = exc.message.strip().splitlines()
        return lines[0] if lines else "trap"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
