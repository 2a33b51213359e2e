"""The built-in tools every agent starts with: `exec`, `read`, `write`, `edit`, `web_fetch`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from nodmix.config.schema import ExecToolConfig, ToolsConfig, WebFetchToolConfig
from nodmix.security.workspace_guard import DEFAULT_ACCESS, WorkspaceAccess
from nodmix.tools.base import Tool
from nodmix.tools.core import exec as exec_module
from nodmix.tools.core import web_fetch as web_fetch_module
from nodmix.tools.core.edit import EditTool
from nodmix.tools.core.exec import ExecTool
from nodmix.tools.core.read import ReadTool
from nodmix.tools.core.web_fetch import WebFetchTool
from nodmix.tools.core.write import WriteTool
from nodmix.tools.isolation import Isolation

__all__ = ["EditTool", "ExecTool", "ReadTool", "WebFetchTool", "WriteTool", "core_tools"]


def _positive(value: int | None, default: int | float) -> int | float:
    # `None` means "not set"; zero or negative values are treated the same rather than
    # producing a tool that times out instantly or keeps no output.
    return value if value is not None and value > 0 else default


def core_tools(
    config: ToolsConfig | None = None,
    *,
    read_roots: Sequence[Path] = (),
    exec_env: Mapping[str, str] | None = None,
    isolation: Isolation | None = None,
    workspace_access: WorkspaceAccess = DEFAULT_ACCESS,
    protected: tuple[Path, ...] | None = None,
) -> list[Tool]:
    """Build the core tools, applying the `tools.exec` and `tools.webFetch` settings.

    Args:
        config: The `tools` config section, or `None` for defaults.
        read_roots: Folders outside the workspace that `read` may also read (skill folders).
        exec_env: Variables added to the environment of `exec` commands (skill settings).
        isolation: The agent's sandbox: `exec` of a sandboxed session runs inside it and
            `web_fetch` refuses private addresses there (unless `allowPrivateNetwork`).
        workspace_access: What `write` and `edit` let turns that do not speak for the owner
            write (`agents.defaults.sandbox.workspaceAccess`).
        protected: More paths such turns may not write when they lie in the workspace
            (`workspace_guard.instruction_sources`; default: the config file).
    """
    exec_config = (config.exec if config else None) or ExecToolConfig()
    fetch_config = (config.web_fetch if config else None) or WebFetchToolConfig()
    return [
        ExecTool(
            timeout_seconds=_positive(
                exec_config.timeout_seconds, exec_module.DEFAULT_TIMEOUT_SECONDS
            ),
            max_output_bytes=int(
                _positive(exec_config.max_output_bytes, exec_module.DEFAULT_MAX_OUTPUT_BYTES)
            ),
            extra_env=exec_env,
            isolation=isolation,
        ),
        ReadTool(read_roots=read_roots),
        WriteTool(access=workspace_access, also=protected),
        EditTool(access=workspace_access, also=protected),
        WebFetchTool(
            timeout_seconds=_positive(
                fetch_config.timeout_seconds, web_fetch_module.DEFAULT_TIMEOUT_SECONDS
            ),
            max_bytes=int(_positive(fetch_config.max_bytes, web_fetch_module.DEFAULT_MAX_BYTES)),
            isolation=None if fetch_config.allow_private_network else isolation,
        ),
    ]
