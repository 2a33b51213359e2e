"""The `notes` example plugin: markdown notes in the agent workspace.

Tools: `note_add`, `note_list`, `note_read`, `note_search` (owned by plugin `notes`, so their
catalog ids are `nodmix:notes:<name>`). A `before_tool_call` hook keeps the generic file tools
from rewriting notes behind the plugin's back (config `protect`, default true). In code mode the
plugin also offers the `Notes` namespace: `Notes.add(title, text)`, `Notes.list()`,
`Notes.read(id)`, `Notes.search(query)`.

The plugin runs outside any sandbox, and the folder may hold links a sandboxed command made:
every note is resolved and held to the workspace like the `read` and `write` tools' paths, and
written only where `write` would write for the turn (`nodmix.security.workspace_guard`).

Enable it with `nodmix plugins enable notes`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodmix.errors import ToolError
from nodmix.hooks import BeforeToolCallResult, ToolCallInfo
from nodmix.plugins.api import Plugin, PluginAPI
from nodmix.tools.base import ToolContext, ToolResult
from nodmix.tools.core.textfiles import read_text, write_atomic
from nodmix.tools.core.write import writable_path
from nodmix.tools.workspace import resolve_path

if TYPE_CHECKING:
    from nodmix.codemode.namespaces import NamespaceContext

NOTES_DIR = "notes"
_SLUG_RE = r"[^a-z0-9]+"


def _slug(title: str) -> str:
    slug = re.sub(_SLUG_RE, "-", title.lower()).strip("-")
    return slug[:60] or "note"


def _notes_dir(ctx: ToolContext) -> Path:
    path = ctx.workspace / NOTES_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def _text(ctx: ToolContext, path: Path) -> str | None:
    """A note's text, or None when it leads out of the workspace or is not a text file."""
    rel = f"{NOTES_DIR}/{path.name}"
    try:
        return read_text(resolve_path(ctx.workspace, rel), rel)
    except ToolError:
        return None


def _title_of(path: Path, text: str) -> str:
    first = text.split("\n", 1)[0]
    return first.removeprefix("# ").strip() or path.stem


async def note_add(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Create or replace a note."""
    title = str(args.get("title", "")).strip()
    text = str(args.get("text", ""))
    if not title:
        return ToolResult.error("note_add needs a non-empty title")
    _notes_dir(ctx)
    shown = f"{NOTES_DIR}/{_slug(title)}.md"
    try:
        path = writable_path(ctx, shown)
        existed = path.exists()
        write_atomic(path, f"# {title}\n\n{text.rstrip()}\n".encode(), shown)
    except ToolError as exc:
        return ToolResult.error(str(exc))
    verb = "updated" if existed else "added"
    return ToolResult.text(f"{verb} note {path.stem!r}", details={"id": path.stem, "title": title})


async def note_list(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """List notes, newest first."""
    files = sorted(_notes_dir(ctx).glob("*.md"), key=lambda p: p.lstat().st_mtime, reverse=True)
    texts = [(p, _text(ctx, p)) for p in files]
    notes = [{"id": p.stem, "title": _title_of(p, t)} for p, t in texts if t is not None]
    lines = [f"- {n['id']}: {n['title']}" for n in notes] or ["(no notes yet)"]
    return ToolResult.text("\n".join(lines), details={"notes": notes})


async def note_read(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Read one note by id."""
    note_id = _slug(str(args.get("id", "")))
    path = _notes_dir(ctx) / f"{note_id}.md"
    text = _text(ctx, path)
    if text is None:
        return ToolResult.error(f"no note {note_id!r}; use note_list to see the ids")
    title = _title_of(path, text)
    return ToolResult.text(text, details={"id": note_id, "title": title, "text": text})


async def note_search(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Find notes whose title or text contains every word of the query."""
    words = [w for w in str(args.get("query", "")).lower().split() if w]
    hits = []
    for path in sorted(_notes_dir(ctx).glob("*.md")):
        text = _text(ctx, path)
        if text is not None and all(w in text.lower() for w in words):
            hits.append({"id": path.stem, "title": _title_of(path, text)})
    lines = [f"- {h['id']}: {h['title']}" for h in hits] or ["(no matching notes)"]
    return ToolResult.text("\n".join(lines), details={"notes": hits})


def _touches_notes(info: ToolCallInfo) -> bool:
    if info.tool_id not in ("nodmix:core:write", "nodmix:core:edit"):
        return False
    path = str(info.params.get("path", "")).replace("\\", "/").lstrip("./")
    return path == NOTES_DIR or path.startswith(f"{NOTES_DIR}/")


def _scope(ctx: NamespaceContext) -> dict[str, Any]:
    from nodmix.codemode.namespaces import namespace_tool

    return {
        "folder": NOTES_DIR,
        "add": namespace_tool("note_add", lambda a: {"title": _arg(a, 0), "text": _arg(a, 1)}),
        "list": namespace_tool("note_list", lambda a: {}),
        "read": namespace_tool("note_read", lambda a: {"id": _arg(a, 0)}),
        "search": namespace_tool("note_search", lambda a: {"query": _arg(a, 0)}),
    }


def _arg(args: list[Any], index: int) -> str:
    return str(args[index]) if len(args) > index and args[index] is not None else ""


def register(api: PluginAPI) -> None:
    """Register the notes tools and the protection hook."""
    string = {"type": "string"}
    api.tool(
        name="note_add",
        description="Save a markdown note under a title (replaces a note with the same title).",
        parameters={
            "type": "object",
            "properties": {
                "title": {**string, "description": "Note title"},
                "text": {**string, "description": "Markdown body"},
            },
            "required": ["title", "text"],
        },
    )(note_add)
    api.tool(name="note_list", description="List saved notes (id and title).")(note_list)
    api.tool(
        name="note_read",
        description="Read a saved note by its id.",
        parameters={"type": "object", "properties": {"id": string}, "required": ["id"]},
    )(note_read)
    api.tool(
        name="note_search",
        description="Search notes; every word of the query must appear.",
        parameters={"type": "object", "properties": {"query": string}, "required": ["query"]},
    )(note_search)

    from nodmix.codemode.namespaces import NamespaceRegistration

    api.register_code_mode_namespace(
        NamespaceRegistration(
            id="notes",
            global_name="Notes",
            description="The user's markdown notes.",
            prompt="Notes.add(title, text), Notes.list(), Notes.read(id), Notes.search(query); "
            "each resolves to structured data ({id, title, text} or {notes: [...]}).",
            required_tool_names=("note_add", "note_list", "note_read", "note_search"),
            create_scope=_scope,
        )
    )

    if api.config.get("protect", True):

        async def protect(info: ToolCallInfo) -> BeforeToolCallResult | None:
            if _touches_notes(info):
                return BeforeToolCallResult(
                    block=True, reason="notes are managed by the notes plugin: use note_add"
                )
            return None

        # Only these tools can write notes (naming them keeps the hook off every other call).
        api.on_before_tool_call(protect, tools=("write", "edit"))


plugin = Plugin(
    id="notes",
    name="Notes",
    description="Markdown notes in the agent workspace, with search.",
    version="1.0",
    register=register,
    default_enabled=False,
)
