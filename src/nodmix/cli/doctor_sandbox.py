"""`nodmix doctor`'s code-mode checks: what is really there, not what should be.

Imports the code-mode modules (a missing Python package shows up here, not in the middle of a
turn), verifies the runtime's hash, boots a real sandbox cell and runs a small program in it,
and runs the TypeScript transform. Each failure is one finding with the fix.
"""

from __future__ import annotations

import importlib
from typing import Literal

from nodmix.invocation import nodmix_command

Level = Literal["ok", "warn", "error"]
Finding = tuple[str, Level, str, str | None]
"""(name, level, detail, fix)."""

CODE_MODE_MODULES = (
    "wasmtime",
    "nodmix.sandbox.runtime",
    "nodmix.sandbox.cell",
    "nodmix.sandbox.threads",
    "nodmix.sandbox.typescript",
    "nodmix.codemode.engine",
    "nodmix.codemode.handoff",
    "nodmix.codemode.tasks",
    "nodmix.codemode.surface",
    "nodmix.mcp",
)
"""What a code-mode turn imports; one missing package breaks every code-mode run."""

REINSTALL = "reinstall nodmix with its dependencies (`pip install --force-reinstall nodmix`)"


class _NoHost:
    """The doctor's probe program calls nothing on the host."""

    def on_call(self, op: str, payload_json: str) -> str | None:
        return None

    def on_request(self, request_id: int, op: str, payload_json: str) -> tuple[bool, str] | None:
        return False, '"the doctor probe has no host functions"'


def check_imports() -> Finding | None:
    """An error finding if a code-mode module cannot be imported."""
    for module in CODE_MODE_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing = getattr(exc, "name", None) or module
            return (
                "code-mode modules",
                "error",
                f"cannot import {module}: Python module {missing!r} is missing ({exc})",
                f"`pip install {missing.split('.')[0]}`, or {REINSTALL}",
            )
    return None


def check_runtime(*, fix: bool, code_mode_on: bool) -> list[Finding]:
    """Imports, runtime hash, a real cell run and the TypeScript transform."""
    broken = check_imports()
    if broken is not None:
        return [broken]
    from nodmix.sandbox import assets
    from nodmix.sandbox.assets import FIX_HINT, FORCE_HINT

    report = assets.status()
    if not report.installed and fix:
        assets.install()
        report = assets.status()
    if report.present and not report.sha256_ok:
        return [("code-mode runtime", "error", report.hint, FORCE_HINT.removeprefix("run "))]
    if not report.installed:
        level: Level = "warn"
        when = "the first code-mode run fetches it (needs the network)"
        detail = f"quickjs-wasi {report.version} not installed yet; {when}"
        if not code_mode_on:
            detail += "; code mode is off"
        return [
            (
                "code-mode runtime",
                level,
                detail,
                f"{FIX_HINT} (or `{nodmix_command()} doctor --fix`)",
            )
        ]
    return [_probe_cell(report.version), _probe_typescript()]


def _probe_cell(version: str) -> Finding:
    from nodmix.errors import SandboxError
    from nodmix.sandbox import Cell, Completed, get_runtime

    try:
        with Cell.boot(None, _NoHost(), runtime=get_runtime()) as cell:
            outcome = cell.run("return 6 * 7")
    except SandboxError as exc:
        return (
            "code-mode runtime",
            "error",
            str(exc),
            f"`{nodmix_command()} sandbox install --force`",
        )
    if not isinstance(outcome, Completed) or outcome.value() != 42:
        return (
            "code-mode runtime",
            "error",
            f"a sandbox cell gave an unexpected result: {outcome!r}",
            f"`{nodmix_command()} sandbox install --force`",
        )
    return ("code-mode runtime", "ok", f"quickjs-wasi {version} verified; a sandbox cell ran", None)


def _probe_typescript() -> Finding:
    from nodmix.errors import NodmixError
    from nodmix.sandbox import transform_typescript

    try:
        transform_typescript("const n: number = 1; return n;")
    except NodmixError as exc:
        return ("code-mode TypeScript", "error", str(exc), REINSTALL)
    return ("code-mode TypeScript", "ok", "the TypeScript transform works", None)
