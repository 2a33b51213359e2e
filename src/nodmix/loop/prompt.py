"""The system prompt of a turn: identity, time, workspace, tools, saved memory."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path, PurePath

from nodmix.errors import WorkspaceEscapeError
from nodmix.tools.base import ToolSpec
from nodmix.tools.confined import read_head

MEMORY_FILE = "MEMORY.md"
MEMORY_CAP_CHARS = 6000


def build_system_prompt(
    *,
    agent_name: str,
    workspace: Path,
    tools: Sequence[ToolSpec],
    now: datetime,
    instructions: str | None = None,
    addition: str | None = None,
    code_mode: bool = False,
    skills: str | None = None,
    memory: bool = True,
) -> str:
    """Assemble the system prompt. `addition` comes from the context engine and goes first;
    `skills` is the one-line-per-skill section (shown only when tools can read the skills);
    `memory`: the turn may read the owner's memory (`nodmix.origin.sees_owner_memory`), so
    `MEMORY.md` is included."""
    parts: list[str] = []
    if addition:
        parts.append(addition.strip())
    parts.append(
        f"You are {agent_name}, a personal assistant running on the user's own computer "
        "through Nodmix. Be direct and accurate. When a tool can do or check something, use it "
        "rather than guessing, and never make up what a tool returned."
    )
    parts.append(f"Current time: {now.strftime('%A %Y-%m-%d %H:%M')} ({_tz(now)}).")
    parts.append(
        f"Workspace: {workspace}. File and shell tools work relative to this folder and cannot "
        "reach outside it."
    )
    if code_mode:
        parts.append(
            "Tools: you act through `exec`, which runs a short JavaScript or TypeScript program "
            "that can search, inspect and call the available tools, and `wait`, which resumes a "
            "program that is still waiting for tool results. Prefer one program that does the "
            "whole job over many small ones."
        )
    elif tools:
        lines = [f"- {t.name}: {_first_line(t.description)}" for t in tools]
        parts.append("Tools:\n" + "\n".join(lines))
    else:
        parts.append("No tools are available in this conversation; answer from what you know.")
    if skills and (tools or code_mode):
        parts.append(skills.strip())
    notes = read_memory(workspace) if memory else None
    if notes:
        parts.append(f"Notes you saved earlier ({MEMORY_FILE}):\n{notes}")
    if instructions:
        parts.append(instructions.strip())
    return "\n\n".join(parts)


def read_memory(workspace: Path) -> str | None:
    """The workspace's `MEMORY.md`, capped, or None."""
    # Only a regular file in the workspace itself: a sandboxed command may have left a symlink
    # to a secret of the host, a FIFO (which would block the turn) or a link to /dev/zero there.
    try:
        raw = read_head(workspace, PurePath(MEMORY_FILE), MEMORY_CAP_CHARS * 4 + 4)
    except (OSError, WorkspaceEscapeError):  # missing, a symlink, not a regular file
        return None
    text = raw.decode("utf-8", errors="ignore").strip()
    if len(text) > MEMORY_CAP_CHARS:
        text = text[:MEMORY_CAP_CHARS] + "\n[... truncated]"
    return text or None


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= 200 else line[:197] + "..."


def _tz(now: datetime) -> str:
    offset = now.utcoffset()
    if offset is None:
        return "local time"
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"
