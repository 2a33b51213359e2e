"""The on-disk compiled-module cache (serialized wasmtime code), private and verified.

Compiling `quickjs.wasm` with Cranelift takes ~0.4 s; deserializing the cached code takes
about a millisecond. `Module.deserialize` executes whatever machine code the file contains,
so we only ever load entries we wrote: the directory is private (0700, owned by us, checked),
files are written atomically, and a sidecar records the sha256 of the serialized bytes, which
is verified on the very bytes handed to wasmtime (no time-of-check gap). The cache key is the
wasm sha256 plus the wasmtime version and the engine flags (`wasm.engine_fingerprint()`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import wasmtime

from nodmix.assets.files import atomic_write, ensure_private_dir
from nodmix.sandbox.wasm import engine_fingerprint


def compiled_cache_paths(cache_dir: Path, name: str, wasm_sha256: str) -> tuple[Path, Path]:
    """Paths of the serialized module and of its metadata sidecar."""
    key = hashlib.sha256(f"{wasm_sha256};{engine_fingerprint()}".encode()).hexdigest()[:16]
    stem = f"{name}-{wasm_sha256[:16]}-{key}"
    return cache_dir / f"{stem}.cwasm", cache_dir / f"{stem}.json"


def _read_trusted_cwasm(cwasm: Path, meta_path: Path, wasm_sha256: str) -> bytes | None:
    """Bytes of a cache entry we wrote ourselves, or None when it is absent or not trustworthy.

    `Module.deserialize` executes whatever machine code the file contains, so we only accept a
    file in our private directory whose digest matches the sidecar written next to it; this
    also rejects torn or corrupted files.
    """
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        data = cwasm.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    expected = {"wasm_sha256": wasm_sha256, "engine": engine_fingerprint()}
    if any(meta.get(k) != v for k, v in expected.items()):
        return None
    if meta.get("cwasm_sha256") != hashlib.sha256(data).hexdigest():
        return None
    return data


def load_compiled_module(
    engine: wasmtime.Engine,
    wasm: bytes,
    *,
    name: str,
    wasm_sha256: str,
    cache_dir: Path | None,
) -> tuple[wasmtime.Module, bool]:
    """Load `wasm` from the compiled cache, compiling and caching it on a miss.

    Args:
        engine: The engine the module is for (its settings are part of the cache key).
        wasm: The verified wasm bytes.
        name: A short file-name prefix for the cache entry.
        wasm_sha256: Hex sha256 of `wasm` (already verified by the caller).
        cache_dir: Private cache directory, or None to compile in memory only.

    Returns:
        The module and whether it came from the cache.
    """
    if cache_dir is not None:
        cwasm, meta = compiled_cache_paths(cache_dir, name, wasm_sha256)
        data = _read_trusted_cwasm(cwasm, meta, wasm_sha256)
        if data is not None:
            try:
                return wasmtime.Module.deserialize(engine, data), True
            except wasmtime.WasmtimeError:
                pass  # e.g. a different CPU with the same key: recompile and overwrite
    module = wasmtime.Module(engine, wasm)
    if cache_dir is not None:
        try:
            ensure_private_dir(cache_dir)
            data = bytes(module.serialize())
            record = {
                "wasm_sha256": wasm_sha256,
                "engine": engine_fingerprint(),
                "cwasm_sha256": hashlib.sha256(data).hexdigest(),
            }
            atomic_write(cwasm, data)
            atomic_write(meta, json.dumps(record).encode())
        except OSError:
            pass  # a read-only cache only costs the compile time on the next start
    return module, False
