"""The memory flush: a silent turn before compaction that saves durable notes to files.

Compaction keeps the gist of a conversation; notes the agent writes itself (`MEMORY.md` for
lasting facts, `memory/<date>.md` for the day's work) keep what it knows matters, in its own
words, across sessions. Shortly before compaction is due, the agent gets one private turn to
write them.

The flush is invisible to the user and to the conversation:

- it runs the normal agent loop on a *shadow* of the session: it sees the history, but its own
  prompt, answers and tool results stay in memory and never reach the transcript, so they are
  not a user turn, are not replayed to the model and never show up as a reply;
- it only gets `read`, `write` and `edit`, and those only accept `MEMORY.md` and
  `memory/*.md` (any other path is an error result the model can read);
- in a session that does not speak for the owner (a group chat, a per-peer DM, automation:
  `nodmix.security.workspace_guard`) they accept only that chat's own notes file,
  `memory/peers/<channel>-<chat>.md`, which is searchable but never put into a prompt, so
  what such a chat said cannot become the owner's instructions;
- what it did is recorded as one `custom` entry (`nodmix.memory-flush`: time, files written,
  outcome), which the model never sees and which marks the flush done until the next
  compaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final

import msgspec

from nodmix.agents import AgentProfile
from nodmix.compaction.accounting import FLUSH_ENTRY_TYPE
from nodmix.compaction.settings import MemoryFlushSettings
from nodmix.context.legacy import LegacyContextEngine
from nodmix.events import discard
from nodmix.loop import RunTools, TurnDeps, TurnRequest, run_turn
from nodmix.loop.model_call import ModelResolver
from nodmix.messages import JsonObject, Message, ToolResultMessage, user_message
from nodmix.origin import TurnOrigin
from nodmix.security.workspace_guard import peer_notes, speaks_for_owner
from nodmix.sessions.session import Session
from nodmix.tools.base import Tool, ToolContext, ToolOrigin, ToolResult, ToolRunner, ToolSpec
from nodmix.tools.workspace import resolve_path

log = logging.getLogger("nodmix.compaction")

MEMORY_TOOLS: Final = frozenset({"read", "write", "edit"})
FLUSH_MAX_STEPS: Final = 8

DEFAULT_FLUSH_PROMPT: Final = (
    "[Housekeeping, not from the user] The earlier part of this conversation will soon be "
    "condensed to free context space. Before that happens, save anything worth keeping beyond "
    "this conversation:\n"
    "- lasting facts, preferences and decisions go in MEMORY.md (read it first and update it "
    "rather than repeating what is there);\n"
    "- today's progress, open threads and next steps go in memory/{date}.md (append).\n"
    "Only these files can be written. If there is nothing new worth saving, write nothing. "
    "Reply with one short line saying what you saved; nobody will see the reply."
)

DEFAULT_FLUSH_SYSTEM: Final = (
    "You are doing private housekeeping between turns. Work only with your memory files "
    "(MEMORY.md and memory/*.md); do not address the user or continue the conversation."
)


DEFAULT_PEER_FLUSH_PROMPT: Final = (
    "[Housekeeping, not from the user] The earlier part of this conversation will soon be "
    "condensed to free context space. Before that happens, save anything worth keeping about "
    "this chat beyond this conversation in {file} (read it first and update it rather than "
    "repeating what is there). Only that file can be written. If there is nothing new worth "
    "saving, write nothing. Reply with one short line saying what you saved; nobody will see "
    "the reply."
)


def is_memory_path(workspace: Path, path: str, origin: TurnOrigin | None = None) -> bool:
    """Whether `path` (as a tool gets it) names `MEMORY.md` or a `memory/*.md` file, or, with
    the `origin` of a chat that does not speak for the owner, that chat's own notes file."""
    try:
        resolved = resolve_path(workspace, path)
    except Exception:
        return False
    relative = PurePosixPath(resolved.relative_to(workspace.resolve()).as_posix())
    if origin is not None:
        return relative == peer_notes(origin)
    if relative == PurePosixPath("MEMORY.md"):
        return True
    return len(relative.parts) == 2 and relative.parts[0] == "memory" and relative.suffix == ".md"


DEFAULT_PEER_FLUSH_SYSTEM: Final = (
    "You are doing private housekeeping between turns. Work only with this chat's notes "
    "file; do not address the user or continue the conversation."
)


class MemoryOnlyTool(msgspec.Struct, frozen=True):
    """A file tool that refuses every path except the memory files (with `peer`, the origin of
    a chat that does not speak for the owner: every path except that chat's notes file)."""

    inner: Tool
    peer: TurnOrigin | None = None

    @property
    def spec(self) -> ToolSpec:
        """The inner tool's spec."""
        return self.inner.spec

    @property
    def origin(self) -> ToolOrigin:
        """The inner tool's origin (hooks see the real tool)."""
        return self.inner.origin

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Run the inner tool when the path is a memory file."""
        path = args.get("path")
        if not isinstance(path, str) or not is_memory_path(ctx.workspace, path, self.peer):
            allowed = "MEMORY.md and memory/*.md" if self.peer is None else peer_notes(self.peer)
            return ToolResult.error(
                f"During memory housekeeping only {allowed} can be used, not {path!r}."
            )
        return await self.inner.call(args, ctx)


class ShadowSession:
    """A session view for the flush turn: reads the real history, keeps its own messages."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.added: list[Message] = []

    @property
    def key(self) -> str:
        """The real session's key."""
        return self._session.key

    @property
    def session_id(self) -> str:
        """The real session's id."""
        return self._session.session_id

    @property
    def agent_id(self) -> str:
        """The real session's agent."""
        return self._session.agent_id

    def messages_for_model(self) -> list[Message]:
        """The real history followed by the flush turn's own messages."""
        return [*self._session.messages_for_model(), *self.added]

    def append_message(self, message: Message, *, parent_tool_call_id: str | None = None) -> Any:
        """Keep the message in memory only."""
        if parent_tool_call_id is None:
            self.added.append(message)


class FlushRunner(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a memory flush needs from the runtime."""

    models: ModelResolver
    executor: ToolRunner
    tools: Sequence[Tool]
    """The core tools; the flush keeps `read`, `write` and `edit`, restricted."""
    clock: Callable[[], datetime] = msgspec.field(default=lambda: datetime.now().astimezone())

    async def flush(
        self,
        session: Session,
        agent: AgentProfile,
        refs: Sequence[str],
        settings: MemoryFlushSettings,
        origin: TurnOrigin | None = None,
    ) -> JsonObject:
        """Run the silent turn and record it; returns the recorded data. Never raises.

        `origin` is the session's latest turn's: a chat that does not speak for the owner
        saves to its own notes file only (`memory/peers/`)."""
        now = self.clock()
        peer = None if speaks_for_owner(origin, agent.id, session.key) else origin
        if peer is None:
            text = settings.prompt or DEFAULT_FLUSH_PROMPT
            system = settings.system_prompt or DEFAULT_FLUSH_SYSTEM
        else:
            text = DEFAULT_PEER_FLUSH_PROMPT.replace("{file}", str(peer_notes(peer)))
            system = DEFAULT_PEER_FLUSH_SYSTEM
        prompt = text.replace("{date}", f"{now:%Y-%m-%d}")
        shadow = ShadowSession(session)
        tools = tuple(MemoryOnlyTool(t, peer) for t in self.tools if t.spec.name in MEMORY_TOOLS)
        instructions = "\n\n".join(p for p in (agent.instructions, system) if p)
        request = TurnRequest(
            agent=msgspec.structs.replace(
                agent, instructions=instructions, max_steps=FLUSH_MAX_STEPS
            ),
            session=shadow,
            prompt=user_message(prompt),
            run_id=f"flush_{uuid.uuid4().hex[:12]}",
            tools=RunTools(visible=tools),
            origin=origin,
            model_refs=(settings.model,) if settings.model else tuple(refs),
        )
        deps = TurnDeps(
            models=self.models,
            executor=self.executor,
            context=LegacyContextEngine(),
            clock=self.clock,
        )
        data: JsonObject = {"at": now.isoformat(timespec="seconds"), "ok": True}
        try:
            result = await run_turn(deps, request, discard)
        except Exception as exc:  # housekeeping must never cost the user their turn
            log.warning("memory flush failed: %s", exc)
            data.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        else:
            failed = {
                m.tool_call_id
                for m in shadow.added
                if isinstance(m, ToolResultMessage) and m.is_error
            }
            written = sorted(
                {
                    str(call.arguments.get("path"))
                    for call in result.tool_calls
                    if call.name in ("write", "edit") and call.id not in failed
                }
            )
            data.update(files=written, reply=result.reply[:500], model=result.model)
        session.transcript.append_custom(FLUSH_ENTRY_TYPE, data)
        return data
