"""Code mode: the model sees only `exec` and `wait`; programs run in the QuickJS-WASI sandbox
and reach the run's hidden tool catalog through a narrow JSON bridge.

Exports load on first access, so runs without code mode never import the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodmix.codemode.engine import CodeModeEngine
    from nodmix.codemode.nested import RunServices
    from nodmix.codemode.runs import RunScope, RunStore
    from nodmix.codemode.settings import CodeModeSettings, is_active, resolve_settings
    from nodmix.codemode.tools import (
        VISIBLE_TOOL_NAMES,
        CodeModeRun,
        ExecTool,
        WaitTool,
        boot_data,
    )

_LAZY = {
    "CodeModeEngine": "nodmix.codemode.engine",
    "RunServices": "nodmix.codemode.nested",
    "RunScope": "nodmix.codemode.runs",
    "RunStore": "nodmix.codemode.runs",
    "CodeModeSettings": "nodmix.codemode.settings",
    "is_active": "nodmix.codemode.settings",
    "resolve_settings": "nodmix.codemode.settings",
    "VISIBLE_TOOL_NAMES": "nodmix.codemode.tools",
    "CodeModeRun": "nodmix.codemode.tools",
    "ExecTool": "nodmix.codemode.tools",
    "WaitTool": "nodmix.codemode.tools",
    "boot_data": "nodmix.codemode.tools",
}

__all__ = [
    "VISIBLE_TOOL_NAMES",
    "CodeModeEngine",
    "CodeModeRun",
    "CodeModeSettings",
    "ExecTool",
    "RunScope",
    "RunServices",
    "RunStore",
    "WaitTool",
    "boot_data",
    "is_active",
    "resolve_settings",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nodmix.codemode' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
