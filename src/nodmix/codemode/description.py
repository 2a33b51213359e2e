"""What the model reads about `exec` and `wait`: descriptions and JSON Schemas.

The description stays small whatever the catalog holds: tools are found by searching inside the
program, not listed here. MCP servers and plugin namespaces add a short section only when the
run can actually see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LANGUAGES = ("javascript", "typescript")

EXEC_BASE = (
    "Run a JavaScript program (or TypeScript, transpiled without type checking) in an isolated "
    "sandbox to do the user's task with tools. The program body is an async function: use "
    "`await`, and `return` the final value (no return gives null). There is no Node.js, no "
    "`require`/`import`, no filesystem or network in the program itself (console.log, "
    "setTimeout, sleep(ms) and URL work); every action goes through tools:\n"
    "- `ALL_TOOLS`: compact list of available tools ({id, name, description, source}).\n"
    "- `await tools.search(query, {limit})`: best-matching tools for a plain-language query.\n"
    "- `await tools.describe(id)`: one tool with its input JSON Schema.\n"
    "- `await tools.call(id, input)`: run a tool; resolves to {tool, text, details} (`text` is "
    "what the tool printed, `details` its structured data) and rejects with an Error when the "
    "tool fails. `tools.<name>(input)` is a shortcut for unambiguous tool names.\n"
    "- `text(value)` / `json(value)`: add output for the user; the returned value is your result.\n"
    "Start several calls with Promise.all to run them in parallel (extra ones queue). If the "
    "result has status "
    '"waiting", tools are still running: call `wait` with its runId.'
)

WAIT_DESCRIPTION = (
    "Resume a code-mode program that `exec` (or an earlier `wait`) returned with status "
    '"waiting". Pass its runId. Returns the same result shape as exec; it may be "waiting" '
    "again if the tools are still running."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespacePrompt:
    """A visible namespace, as it is introduced to the model."""

    global_name: str
    description: str | None = None
    prompt: str | None = None


def exec_description(
    *,
    languages: Sequence[str] = ("javascript", "typescript"),
    mcp_servers: Sequence[str] = (),
    namespaces: Sequence[NamespacePrompt] = (),
) -> str:
    """The `exec` description for a run's visible catalog."""
    parts = [EXEC_BASE]
    if tuple(languages) == ("javascript",):
        parts.append('Only language "javascript" is enabled.')
    elif tuple(languages) == ("typescript",):
        parts.append('Only language "typescript" is enabled.')
    if mcp_servers:
        servers = ", ".join(mcp_servers)
        parts.append(
            f"MCP servers ({servers}) are reached only as `await MCP.<server>.<tool>({{...}})` "
            "with one object argument, never through tools.call. Their TypeScript declarations "
            "are virtual files: `await API.list('mcp')` lists them and "
            "`await API.read('mcp/<server>.d.ts')` returns one; `MCP.<server>.$api()` gives the "
            "same header inline."
        )
    for ns in namespaces:
        line = f"- `{ns.global_name}`" + (f": {ns.description.strip()}" if ns.description else "")
        if ns.prompt:
            line += f"\n  {ns.prompt.strip()}"
        parts.append(
            ("Namespaces (also under `namespaces.<name>`):\n" if ns is namespaces[0] else "") + line
        )
    return "\n\n".join(parts)


def exec_parameters() -> dict[str, Any]:
    """The `exec` input schema: flat properties, none required, a plain string enum of both
    languages. A language `tools.codeMode.languages` disables is refused by `exec` itself,
    with a `failed` result that says what to send instead (the description names the enabled
    one), not by schema validation."""
    return {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "Program source. `tools`, `ALL_TOOLS`, `text`, `json` (and `API`, "
                "`MCP` and namespaces when available) are in scope.",
            },
            "command": {
                "type": "string",
                "description": "Alias of `code` for exec-style policies; prefer `code`.",
            },
            "language": {
                "type": "string",
                "enum": list(LANGUAGES),
                "description": 'Source language; defaults to "javascript".',
            },
        },
    }


def wait_parameters() -> dict[str, Any]:
    """The `wait` input schema."""
    return {
        "type": "object",
        "properties": {
            "runId": {"type": "string", "description": "The runId of a waiting code-mode result."}
        },
        "required": ["runId"],
    }
