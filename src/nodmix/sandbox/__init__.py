"""`nodmix.sandbox`: a QuickJS-WASI JavaScript sandbox on wasmtime, with a generic host bridge.

The sandbox runs untrusted JavaScript (or TypeScript, after `transform_typescript`) in a
wasm instance with no capabilities, enforces time/memory/stack limits, and can snapshot a
suspended program and restore it later in a fresh VM. It knows nothing about tools or code
mode; an embedding supplies:

- a *setup script*: JS source of a function expression that receives the private capability
  `{call, request, requestJson, stringify, tooDeep}` and installs the globals the guest should
  see;
- a `HostHandler` that answers `call(op, payloadJson)` synchronously and `request(op,
  payload)` asynchronously (settled inline or later with `Cell.deliver`).

```
from nodmix.sandbox import Cell, SandboxLimits, Completed, Pending

cell = Cell.boot(SETUP_JS, handler, limits=SandboxLimits(timeout=5))
outcome = cell.run("const r = await api.fetch('x'); return r.length")
if isinstance(outcome, Pending):
    blob = cell.snapshot()              # keep it private; see nodmix.sandbox.snapshot
    ...
    cell = Cell.restore(blob, handler, setup_script=SETUP_JS)
    cell.deliver(outcome.request_ids[0], True, '"hello"')
    outcome = cell.pump()
```

Cells are fresh wasm instances copied from a boot template (the prelude and setup script,
booted once per process; see `templates.py`), and snapshots hold only what changed since; the
setup script lets another process rebuild that template.

The runtime (`quickjs.wasm`) is installed by `nodmix sandbox install` (or `firstuse.py` on
code mode's first run); without it every entry point raises `RuntimeUnavailableError`.
Importing this package is cheap: wasmtime and the
TypeScript transform load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nodmix.errors import RuntimeUnavailableError, SandboxError
from nodmix.sandbox.base import (
    Completed,
    Failed,
    FailureKind,
    HostCallError,
    HostHandler,
    Outcome,
    Pending,
    SandboxLimits,
    SnapshotError,
    TrustedScript,
    TypeScriptTransformError,
)
from nodmix.sandbox.source_checks import MODULE_ACCESS_DENIED, ModuleAccess, find_module_access

if TYPE_CHECKING:
    from nodmix.sandbox.assets import InstallReport, SandboxStatus, install, status
    from nodmix.sandbox.cell import Cell
    from nodmix.sandbox.prelude import wrap_async
    from nodmix.sandbox.runtime import QuickJSRuntime, get_runtime
    from nodmix.sandbox.threads import AsyncCell, run_in_worker
    from nodmix.sandbox.typescript import transform_typescript, typescript_loaded

_LAZY = {
    "Cell": "nodmix.sandbox.cell",
    "wrap_async": "nodmix.sandbox.prelude",
    "QuickJSRuntime": "nodmix.sandbox.runtime",
    "get_runtime": "nodmix.sandbox.runtime",
    "AsyncCell": "nodmix.sandbox.threads",
    "run_in_worker": "nodmix.sandbox.threads",
    "transform_typescript": "nodmix.sandbox.typescript",
    "typescript_loaded": "nodmix.sandbox.typescript",
    "InstallReport": "nodmix.sandbox.assets",
    "SandboxStatus": "nodmix.sandbox.assets",
    "install": "nodmix.sandbox.assets",
    "status": "nodmix.sandbox.assets",
}

__all__ = [
    "MODULE_ACCESS_DENIED",
    "AsyncCell",
    "Cell",
    "Completed",
    "Failed",
    "FailureKind",
    "HostCallError",
    "TrustedScript",
    "HostHandler",
    "InstallReport",
    "ModuleAccess",
    "Outcome",
    "Pending",
    "QuickJSRuntime",
    "RuntimeUnavailableError",
    "SandboxError",
    "SandboxLimits",
    "SandboxStatus",
    "SnapshotError",
    "TypeScriptTransformError",
    "find_module_access",
    "get_runtime",
    "install",
    "run_in_worker",
    "status",
    "transform_typescript",
    "typescript_loaded",
    "wrap_async",
]


def __getattr__(name: str) -> Any:
    # Heavy parts (wasmtime, the runtime, the TypeScript transform) load on first access.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nodmix.sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
