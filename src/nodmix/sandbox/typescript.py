"""TypeScript -> JavaScript for TypeScript cells, with the OXC `transform.wasm` from quickjs-rs.

A pure source transform: no type checking, no module resolution. The wasm is read from the
installed `quickjs_rs` package (sha256-pinned), compiled once and cached like `quickjs.wasm`,
and loaded lazily: importing `nodmix.sandbox` or running JavaScript cells never loads it.

Each transform runs in a fresh Store with a memory cap and an epoch deadline, so hostile
input (100k nested parentheses) only traps that store. The module imports five WASI functions;
they are implemented here as inert stubs (no environment, no files, no stdio, no exit), rather
than through wasmtime's WASI implementation.

Usage with a cell (the wrapper must be applied before transforming, pitfall 15):

```
js = transform_typescript(ts_source)          # wraps in the async IIFE by default
outcome = cell.run(js, filename="cell.ts", wrapped=True)
```
"""

from __future__ import annotations

import importlib.util
import os
import re
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import wasmtime

from nodmix.errors import RuntimeUnavailableError
from nodmix.sandbox import assets, hostio, modcache, wasm
from nodmix.sandbox.base import MiB, TypeScriptTransformError
from nodmix.sandbox.prelude import wrap_async

_FLAG_SOURCE_TS: Final = 1 << 0
_FLAG_STRIP_TYPESCRIPT: Final = 1 << 8
_STATUS_OK: Final = 0
_STATUS_UNCHANGED: Final = 1
_STATUS_NAMES: Final = {2: "bad input", 3: "syntax error", 4: "transform error", 5: "panic"}
_WASI: Final = "wasi_snapshot_preview1"
_U32: Final = struct.Struct("<I")
_EBADF: Final = 8
_EFAULT: Final = 21
_MAX_DIAGNOSTIC: Final = 2000
_PARSE_PREFIX: Final = re.compile(r"^source parse error in [^:]*:\s*")
# An untransformed namespace as OXC prints it: alone on its line, closed by a line holding
# only "}" at the same tab depth.
_NAMESPACE_OPEN: Final = re.compile(
    r"^(\t+)(?:namespace|module)\s+[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*\s*\{$"
)
_BARE_LET: Final = re.compile(r"^let ([A-Za-z_$][\w$]*);$", re.MULTILINE)


@dataclass(slots=True, weakref_slot=True)
class _Run:
    """One transform's store; the import stubs find it through `wasm.current_owner()`."""

    store: wasmtime.Store
    mem: hostio.LinearMemory | None = None


def _with_memory(body: Callable[[hostio.LinearMemory], None]) -> int:
    # Run an import stub against the current transform's memory; bad pointers get EFAULT
    # instead of an exception unwinding through wasm.
    owner = wasm.current_owner()
    if not isinstance(owner, _Run) or owner.mem is None:
        return _EBADF
    try:
        body(owner.mem)
    except hostio.OutOfBounds:
        return _EFAULT
    return 0


def _random_get(buf: int, size: int) -> int:
    return _with_memory(lambda mem: mem.write(buf, os.urandom(size)))  # seeds Rust's hash maps


def _environ_sizes_get(count_ptr: int, size_ptr: int) -> int:
    def write(mem: hostio.LinearMemory) -> None:
        mem.write(count_ptr, _U32.pack(0))
        mem.write(size_ptr, _U32.pack(0))

    return _with_memory(write)


def _environ_get(_environ: int, _buf: int) -> int:
    return 0  # there is no environment


def _fd_write(fd: int, iovs: int, iovs_len: int, nwritten_ptr: int) -> int:
    def swallow(mem: hostio.LinearMemory) -> None:  # report everything as written
        sizes = (struct.unpack("<II", mem.read(iovs + 8 * i, 8))[1] for i in range(iovs_len))
        mem.write(nwritten_ptr, _U32.pack(sum(sizes)))

    return _with_memory(swallow)


def _proc_exit(_code: int) -> None:
    return None  # returning makes the guest hit `unreachable`, which traps this store only


class _Transformer:
    """The compiled transform module, linked with the inert imports."""

    def __init__(self) -> None:
        data = _read_transform_wasm()
        engine = wasm.shared_engine()
        module, _ = modcache.load_compiled_module(
            engine,
            data,
            name="oxc-transform",
            wasm_sha256=assets.TRANSFORM_SHA256,
            cache_dir=assets.compiled_dir(),
        )
        linker = wasmtime.Linker(engine)
        hostio.define_import(linker, _WASI, "random_get", "ii", "i", _random_get)
        hostio.define_import(linker, _WASI, "environ_get", "ii", "i", _environ_get)
        hostio.define_import(linker, _WASI, "environ_sizes_get", "ii", "i", _environ_sizes_get)
        hostio.define_import(linker, _WASI, "fd_write", "iiii", "i", _fd_write)
        hostio.define_import(linker, _WASI, "proc_exit", "i", "", _proc_exit)
        self.pre = linker.instantiate_pre(module)

    def transform(self, source: str, filename: str, timeout: float, memory_bytes: int) -> str:
        store = wasmtime.Store(wasm.shared_engine())
        store.set_limits(memory_size=memory_bytes)
        store.set_epoch_deadline(wasm.epoch_ticks(timeout))
        run = _Run(store)
        try:
            instance = self.pre.instantiate(store)
            x = wasm.Exports(instance, store, owner=run)
            mem = run.mem = hostio.LinearMemory(x.extern("memory"), store)
            name, body = filename.encode(), source.encode("utf-8", "surrogatepass")
            name_ptr, body_ptr = x.qjst_alloc(len(name)), x.qjst_alloc(len(body))
            if not name_ptr or not body_ptr:
                raise TypeScriptTransformError("TypeScript transform: source too large")
            mem.write(name_ptr, name)
            mem.write(body_ptr, body)
            flags = _FLAG_SOURCE_TS | _FLAG_STRIP_TYPESCRIPT
            status = x.qjst_transform(name_ptr, len(name), body_ptr, len(body), flags)
            if status == _STATUS_UNCHANGED:
                return source
            if status == _STATUS_OK:
                return mem.read(x.qjst_result_ptr(), x.qjst_result_len()).decode("utf-8")
            detail = mem.read(x.qjst_error_ptr(), x.qjst_error_len()).decode(errors="replace")
        except (wasmtime.Trap, wasmtime.WasmtimeError, hostio.OutOfBounds) as exc:
            why = "took too long" if wasm.trap_is_interrupt(exc) else "failed on this input"
            raise TypeScriptTransformError(f"TypeScript transform {why}") from None
        kind = _STATUS_NAMES.get(status, f"status {status}")
        message = _diagnostic(detail) or kind
        raise TypeScriptTransformError(
            f"TypeScript {kind} in {filename}: {message}", diagnostics=detail
        )


def _diagnostic(detail: str) -> str:
    lines = [line.strip() for line in detail.strip().splitlines() if line.strip()]
    return _PARSE_PREFIX.sub("", " ".join(lines[:3]))[:_MAX_DIAGNOSTIC]


def _lower_nested_namespaces(js: str, lower: Callable[[str], str]) -> str:
    """Lower `namespace` blocks that OXC left inside the cell's async wrapper.

    OXC (like tsc's checker) only accepts namespaces at the top level of a file, but a cell's
    top level is the body of our async wrapper. Each leftover block is already type-stripped;
    we transform it again on its own, at top level, and splice the result back in place.
    The `let N;` it declares becomes `var N;` so that merged namespaces (several blocks with
    one name) do not redeclare a binding. (Merging a namespace into a class or an enum of the
    same name is not supported inside cells.)
    """
    lines = js.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _NAMESPACE_OPEN.match(lines[i])
        end = -1
        if match:
            indent = match.group(1)
            end = next((k for k in range(i + 1, len(lines)) if lines[k] == indent + "}"), -1)
        if not match or end < 0:
            out.append(lines[i])
            i += 1
            continue
        width = len(indent)
        block = "\n".join(line[width:] for line in lines[i : end + 1])
        lowered = _BARE_LET.sub(r"var \1;", lower(block)).rstrip("\n")
        out.extend(indent + line if line else line for line in lowered.split("\n") if lowered)
        i = end + 1
    return "\n".join(out)


def _read_transform_wasm() -> bytes:
    # Locate the package data without importing `quickjs_rs` itself: its __init__ pulls in its
    # own runtime (~90 ms) that we never use. Only the sha256-pinned wasm file is read.
    spec = importlib.util.find_spec("quickjs_rs")
    locations = list(spec.submodule_search_locations or []) if spec else []
    try:
        if not locations:
            raise FileNotFoundError("the quickjs_rs package is not installed")
        data = (Path(locations[0]) / "_transform.wasm").read_bytes()
    except OSError as exc:
        raise RuntimeUnavailableError(
            f"the TypeScript transform is unavailable ({exc}); reinstall nodmix"
        ) from None
    if assets.sha256_hex(data) != assets.TRANSFORM_SHA256:
        raise RuntimeUnavailableError(
            "the TypeScript transform wasm (quickjs_rs/_transform.wasm) has an unexpected hash; "
            "reinstall nodmix (quickjs-rs==0.2.6)"
        )
    return data


_lock = threading.Lock()
_transformer: _Transformer | None = None


def typescript_loaded() -> bool:
    """Whether this process has loaded the transform (it loads on first use only)."""
    return _transformer is not None


def _get_transformer() -> _Transformer:
    global _transformer
    with _lock:
        if _transformer is None:
            _transformer = _Transformer()
        return _transformer


def transform_typescript(
    source: str,
    *,
    filename: str = "cell.ts",
    wrap: bool = True,
    timeout: float = 2.0,
    memory_bytes: int = 256 * MiB,
) -> str:
    """Strip TypeScript syntax (enums, namespaces and parameter properties are lowered).

    Args:
        source: The TypeScript cell.
        filename: Name used in diagnostics.
        wrap: Wrap `source` in the async IIFE first (needed for top-level `await`/`return`);
            run the result with `cell.run(js, wrapped=True)`.
        timeout: Wall-clock cap of the transform.
        memory_bytes: Linear-memory cap of the transform's store.

    Raises:
        TypeScriptTransformError: The source does not parse, or the transform hit a limit.
        RuntimeUnavailableError: The transform wasm is missing or has the wrong hash.
    """
    transformer = _get_transformer()
    text = wrap_async(source) if wrap else source
    js = transformer.transform(text, filename, timeout, memory_bytes)
    if "namespace" in js or "module" in js:
        js = _lower_nested_namespaces(
            js, lambda block: transformer.transform(block, filename, timeout, memory_bytes)
        )
    return js
