"""The process-wide QuickJS-WASI runtime: engine, compiled module, linker and `InstancePre`.

`quickjs.wasm` imports exactly 6 WASI functions and 6 `env.host_*` callbacks; all 12 are
implemented here in Python and give the guest no capability at all:

- `fd_write` appends to a small per-VM buffer (fd 1/2 only); `fd_close`/`fd_seek` are ENOSYS.
- `clock_time_get` serves the real and monotonic clocks and `random_get` fills buffers from
  `os.urandom`, both through the VM (`ImportTarget.clock_ns` / `random_bytes`), so a boot can
  be probed with shifted clocks (see `bootstate.py`).
- There is no filesystem, network, environment, process or socket import to begin with.
- The module loader (`host_module_normalize`/`host_module_load`) refuses every specifier.
- The timezone is always UTC.
- `host_call` dispatches name-keyed host functions (names survive snapshots);
  `host_interrupt` enforces the VM's deadline.

The linker's callbacks are shared by every store, so they find "their" VM through
`wasm.current_owner()`, which every call into wasm that can reach an import sets (see
`wasm.fast_func`).
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol, cast

import wasmtime

from nodmix.errors import RuntimeUnavailableError
from nodmix.sandbox import assets, hostio, modcache, wasm

_WASI: Final = "wasi_snapshot_preview1"
_ERRNO_SUCCESS: Final = 0
_ERRNO_BADF: Final = 8
_ERRNO_FAULT: Final = 21
_ERRNO_NOSYS: Final = 52
_CLOCK_REALTIME: Final = 0
_CLOCK_MONOTONIC: Final = 1
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_IOVEC: Final = struct.Struct("<II")


class ImportTarget(Protocol):
    """What the import callbacks need from the VM that is currently executing."""

    mem: hostio.LinearMemory

    def write_stdio(self, data: bytes) -> None:
        """Record bytes the guest runtime wrote to fd 1 or 2."""
        ...

    def should_interrupt(self) -> bool:
        """True once the VM's deadline has passed or an interrupt was requested."""
        ...

    def dispatch_host_call(
        self, name_ptr: int, name_len: int, this: int, argc: int, argv: int
    ) -> int:
        """Run the host function named at `name_ptr`; return an owned JSValue box, or 0 after
        throwing."""
        ...

    def free(self, *handles: int) -> None:
        """Free JSValue boxes the C layer handed to the host."""
        ...

    def promise_rejection(self, promise: int, reason: int, handled: int) -> None:
        """A promise was rejected with no handler (`handled` 0), or one got a handler late."""
        ...

    def clock_ns(self, clock_id: int) -> int:
        """Nanoseconds of the realtime (0) or monotonic (1) clock as this VM sees them."""
        ...

    def random_bytes(self, size: int) -> bytes:
        """`size` bytes of entropy for this VM."""
        ...


def _target() -> ImportTarget | None:
    return cast("ImportTarget | None", wasm.current_owner())


def _clock_time_get(clock_id: int, _precision: int, result_ptr: int) -> int:
    vm = _target()
    if vm is None:
        return _ERRNO_BADF
    if clock_id != _CLOCK_REALTIME and clock_id != _CLOCK_MONOTONIC:
        return _ERRNO_NOSYS
    try:
        vm.mem.write(result_ptr, _U64.pack(vm.clock_ns(clock_id)))
    except hostio.OutOfBounds:
        return _ERRNO_FAULT
    return _ERRNO_SUCCESS


def _fd_write(fd: int, iovs: int, iovs_len: int, nwritten_ptr: int) -> int:
    vm = _target()
    if vm is None or fd not in (1, 2):
        return _ERRNO_BADF
    total = 0
    try:
        for i in range(iovs_len):
            ptr, size = _IOVEC.unpack(vm.mem.read(iovs + 8 * i, 8))
            vm.write_stdio(vm.mem.read(ptr, size))
            total += size
        vm.mem.write(nwritten_ptr, _U32.pack(total))
    except hostio.OutOfBounds:
        return _ERRNO_FAULT
    return _ERRNO_SUCCESS


def _fd_close(_fd: int) -> int:
    return _ERRNO_NOSYS


def _fd_fdstat_get(fd: int, stat_ptr: int) -> int:
    vm = _target()
    if vm is None or fd not in (1, 2):
        return _ERRNO_BADF
    try:
        vm.mem.write(stat_ptr, bytes([2]) + bytes(23))  # filetype = character device
    except hostio.OutOfBounds:
        return _ERRNO_FAULT
    return _ERRNO_SUCCESS


def _fd_seek(_fd: int, _offset: int, _whence: int, _result_ptr: int) -> int:
    return _ERRNO_NOSYS


def _random_get(buf: int, size: int) -> int:
    vm = _target()
    if vm is None:
        return _ERRNO_BADF
    try:
        vm.mem.write(buf, vm.random_bytes(size))
    except hostio.OutOfBounds:
        return _ERRNO_FAULT
    return _ERRNO_SUCCESS


def _host_call(name_ptr: int, name_len: int, this_ptr: int, argc: int, argv_ptr: int) -> int:
    vm = _target()
    if vm is None:
        return 0
    return vm.dispatch_host_call(name_ptr, name_len, this_ptr, argc, argv_ptr)


def _host_interrupt() -> int:
    vm = _target()
    # Fail safe: wasm running without an owner should never happen, and then we stop it.
    return 1 if vm is None or vm.should_interrupt() else 0


def _host_promise_rejection(promise: int, reason: int, handled: int) -> None:
    # QuickJS's rejection tracker (enabled at boot): the two boxes are the VM's to keep or free.
    vm = _target()
    if vm is not None:
        vm.promise_rejection(promise, reason, handled)


def _host_module_normalize(_base_ptr: int, _name_ptr: int) -> int:
    return 0  # NULL: QuickJS throws "could not load module"; no specifier is ever resolved


def _host_module_load(_name_ptr: int, _out_len_ptr: int) -> int:
    return 0  # NULL: refuse


def _host_get_timezone_offset(_hi: int, _lo: int) -> int:
    return 0  # always UTC: deterministic and leaks nothing about the host


def _define_imports(linker: wasmtime.Linker) -> None:
    define = hostio.define_import
    define(linker, _WASI, "clock_time_get", "iIi", "i", _clock_time_get)
    define(linker, _WASI, "fd_write", "iiii", "i", _fd_write)
    define(linker, _WASI, "fd_close", "i", "i", _fd_close)
    define(linker, _WASI, "fd_fdstat_get", "ii", "i", _fd_fdstat_get)
    define(linker, _WASI, "fd_seek", "iIii", "i", _fd_seek)
    define(linker, _WASI, "random_get", "ii", "i", _random_get)
    define(linker, "env", "host_call", "iiiii", "i", _host_call)
    define(linker, "env", "host_interrupt", "", "i", _host_interrupt)
    define(linker, "env", "host_promise_rejection", "iii", "", _host_promise_rejection)
    define(linker, "env", "host_module_normalize", "ii", "i", _host_module_normalize)
    define(linker, "env", "host_module_load", "ii", "i", _host_module_load)
    define(linker, "env", "host_get_timezone_offset", "ii", "i", _host_get_timezone_offset)


@dataclass(frozen=True, slots=True, eq=False)
class QuickJSRuntime:
    """A loaded, linked `quickjs.wasm`, shareable by every thread of the process.

    Create it with `QuickJSRuntime.load()` (explicit paths, for tests and tools) or use the
    process-wide `get_runtime()`.

    Attributes:
        engine: The shared wasmtime engine.
        module: The compiled module.
        pre: The pre-linked module; instantiating it takes tens of microseconds.
        wasm_sha256: Hex sha256 of the loaded wasm.
        build_id: First 16 bytes of that sha256; snapshots carry it and only restore into
            the same build.
        from_cache: Whether the compiled module came from the on-disk cache.
        signatures: Export call layouts shared by all instances (filled lazily; entries are
            immutable, so concurrent fills are harmless).
    """

    engine: wasmtime.Engine
    module: wasmtime.Module
    pre: wasmtime.InstancePre
    wasm_sha256: str
    build_id: bytes
    from_cache: bool
    signatures: wasm.SignatureCache = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls,
        *,
        wasm_path: Path | None = None,
        root: Path | None = None,
        expected_sha256: str = assets.WASM_SHA256,
        compile_cache: bool = True,
    ) -> QuickJSRuntime:
        """Load, verify, compile (or deserialize) and link `quickjs.wasm`. Never downloads.

        Args:
            wasm_path: An explicit wasm file (default: the installed one under `root`).
            root: Cache root (default `assets.cache_root()`).
            expected_sha256: The hash the file must have.
            compile_cache: Use the on-disk compiled-module cache.

        Raises:
            RuntimeUnavailableError: The wasm is missing or corrupt, or fails to load.
        """
        path = wasm_path or assets.quickjs_wasm_path(root)
        data = assets.read_verified_file(path, expected_sha256)
        engine = wasm.shared_engine()
        cache = assets.compiled_dir(root) if compile_cache else None
        try:
            module, hit = modcache.load_compiled_module(
                engine, data, name="quickjs", wasm_sha256=expected_sha256, cache_dir=cache
            )
            linker = wasmtime.Linker(engine)
            _define_imports(linker)
            pre = linker.instantiate_pre(module)
        except (wasmtime.WasmtimeError, PermissionError) as exc:
            raise RuntimeUnavailableError(
                f"the QuickJS-WASI runtime failed to load: {wasm.trap_summary(exc)}; "
                f"{assets.FORCE_HINT}"
            ) from None
        return cls(
            engine=engine,
            module=module,
            pre=pre,
            wasm_sha256=expected_sha256,
            build_id=bytes.fromhex(expected_sha256)[:16],
            from_cache=hit,
        )


_runtime_lock = threading.Lock()
_runtime: QuickJSRuntime | None = None


def get_runtime() -> QuickJSRuntime:
    """The process-wide runtime from the installed assets, loaded once (thread-safe).

    Raises:
        RuntimeUnavailableError: Not installed or corrupt; the message says to run
            `nodmix sandbox install`. Failures are not cached, so installing fixes it live.
    """
    global _runtime
    runtime = _runtime
    if runtime is not None:
        return runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = QuickJSRuntime.load()
        return _runtime
