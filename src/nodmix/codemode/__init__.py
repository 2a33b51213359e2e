"""Code mode: the model sees only `exec` and `wait`; programs run in the QuickJS-WASI sandbox
and reach the run's hidden tool catalog through a narrow JSON bridge."""

from nodmix.codemode.engine import CodeModeEngine
from nodmix.codemode.nested import RunServices
from nodmix.codemode.runs import RunScope, RunStore
from nodmix.codemode.settings import CodeModeSettings, is_active, resolve_settings
from nodmix.codemode.tools import VISIBLE_TOOL_NAMES, CodeModeRun, ExecTool, WaitTool, boot_data

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
