"""The interactive chat of `nodmix agent`: one prompt loop for in-process and gateway runs.

The loop reads lines (prompt_toolkit with history when stdin is a terminal, plain `input()`
otherwise), handles the chat's own commands, and hands everything else to a `ChatBackend`:
`LocalChat` in `cli/agent.py` runs turns in this process, `RemoteChat` in `gateway/client.py`
runs them in a gateway. A failed turn prints one line and the prompt comes back.

Messages scheduled jobs post into the chat's session (reminders, `docs/automation.md`) and
results of subagents nobody waited for (`docs/subagents.md`) are announced when the chat opens
("1 new message from cron job X", those after the user's last message) and, through a
gateway, printed as they arrive (above the prompt on a terminal).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nodmix.errors import NodmixError

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

PROMPT = "you> "
HISTORY_FILE = "chat-history"
"""The prompt history, in the state directory."""

COMMANDS = {
    "/help": "this list",
    "/status": "agent, model, session, tokens used, compactions, code mode",
    "/model": "/model provider/model: use another model for this chat",
    "/new": "start a new session under the same key (the old transcript stays on disk)",
    "/compact": "/compact [instructions]: summarise older messages now",
    "/exit": "quit (Ctrl-D too)",
}
SESSION_COMMANDS = ("/new", "/compact")
"""Commands the runtime handles (they go to the backend like a message)."""


class ChatAnswer(Protocol):
    """What a backend reports after a message: a command's message or a finished turn."""

    @property
    def interrupted(self) -> bool: ...

    @property
    def command_message(self) -> str | None: ...

    @property
    def error(self) -> str | None: ...


class ChatBackend(Protocol):
    """Where the chat's messages run."""

    banner: str
    model: str | None
    """The chat's model override (`--model`, `/model`); None uses the agent's."""

    async def send(self, text: str, printer: Any) -> ChatAnswer:
        """Run a message (a turn, `/new` or `/compact`), showing events through `printer`."""
        ...

    async def status(self, model: str | None) -> dict[str, Any]:
        """The session's status with `model` as the override (raises when it is unknown)."""
        ...

    async def unseen(self) -> list[str]:
        """Lines about messages jobs posted since the user last wrote (`new_job_messages`)."""
        ...


class Answer:
    """A plain `ChatAnswer`."""

    def __init__(
        self,
        *,
        interrupted: bool = False,
        command_message: str | None = None,
        error: str | None = None,
    ) -> None:
        self.interrupted = interrupted
        self.command_message = command_message
        self.error = error


# ---- reading lines --------------------------------------------------------------------------


def history_path() -> Path:
    """The prompt history file (`<state dir>/chat-history`)."""
    from nodmix.config.paths import state_dir

    return state_dir() / HISTORY_FILE


def terminal_session() -> PromptSession[str]:
    """A prompt_toolkit session with the history file (created on first use)."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    return PromptSession(history=FileHistory(str(private_history())))


def private_history() -> Path:
    """The history file, created (or tightened) so only the user can read it: what is typed
    into a chat can be as private as a transcript."""
    path = history_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)
    return path


async def prompt_lines(session: PromptSession[str]) -> AsyncIterator[str]:
    """Lines from a prompt_toolkit session until Ctrl-D; Ctrl-C clears the line."""
    while True:
        try:
            line = await session.prompt_async(PROMPT)
        except EOFError:
            return
        except KeyboardInterrupt:
            continue
        yield line


async def plain_lines() -> AsyncIterator[str]:
    """Lines from `input()` (no terminal: no line editing) until end of input."""
    import anyio.to_thread

    while True:
        try:
            line = await anyio.to_thread.run_sync(input, PROMPT)
        except EOFError:
            print()
            return
        yield line


def chat_lines() -> AsyncIterator[str]:
    """Lines typed at the chat prompt: prompt_toolkit on a terminal, `input()` otherwise."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return prompt_lines(terminal_session())
    return plain_lines()


# ---- messages from scheduled jobs ------------------------------------------------------------


def _job_text(message: dict[str, Any]) -> str:
    return "".join(
        str(b.get("text", "")) for b in message.get("content", ()) if isinstance(b, dict)
    )


def _subagent_text(entry: dict[str, Any]) -> str:
    """A subagent's announced result without the header line written for the model."""
    content = entry.get("content")
    text = content if isinstance(content, str) else _job_text({"content": content or ()})
    head, sep, rest = text.partition("]\n\n")
    return rest if sep and head.startswith("[Subagent ") else text


def _subagent_name(details: dict[str, Any]) -> str:
    label = details.get("label")
    return f"{label!r} ({details.get('runId', '')})" if label else str(details.get("runId", ""))


def new_job_messages(entries: Sequence[dict[str, Any]]) -> list[str]:
    """Lines announcing the messages jobs and subagents posted into a session after its last
    user message (entries as `sessions.history` returns them); none when there are none."""
    posted: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for entry in entries:
        if entry.get("type") == "custom_message" and entry.get("customType") == "subagent_result":
            results.append(entry)
            continue
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict) or entry.get("parentToolCallId"):
            continue
        if message.get("role") == "user":
            posted, results = [], []
        elif message.get("role") == "assistant" and message.get("api") == "cron":
            posted.append(message)
    lines: list[str] = []
    if posted:
        jobs = ", ".join(sorted({str(m.get("model", "")).removeprefix("cron:") for m in posted}))
        plural = "s" if len(posted) > 1 else ""
        lines += [f"{len(posted)} new message{plural} from cron job {jobs}:"]
        lines += [f"  {_job_text(m)}" for m in posted]
    for entry in results:
        details = entry.get("details") or {}
        status = details.get("status", "done")
        lines.append(f"result of subagent {_subagent_name(details)}, {status}:")
        lines.append(f"  {_subagent_text(entry)}")
    return lines


def announcement_line(post: Any) -> str:
    """A subagent result announced in this process (`subagents.announce.Announcement`)."""
    from nodmix.subagents.announce import chat_text

    return chat_text(post.run)


def job_message_line(payload: dict[str, Any]) -> str:
    """A `session` event's message as the chat prints it when it arrives."""
    source = payload.get("source") or {}
    entry = payload.get("entry") or {}
    if source.get("kind") == "subagent":
        name = _subagent_name({"label": source.get("label"), "runId": source.get("runId")})
        return f"[from subagent {name}, {source.get('status', '')}] " + _subagent_text(entry)
    message = entry.get("message") or {}
    return f"[from cron job {source.get('jobName', '')!r} ({source.get('jobId', '')})] " + (
        _job_text(message)
    )


def print_above_prompt(text: str) -> None:
    """Print a line without garbling a prompt being typed (prompt_toolkit redraws it below)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        from prompt_toolkit import print_formatted_text

        print_formatted_text(text)
    else:
        print(text, flush=True)


# ---- the loop -------------------------------------------------------------------------------


def help_text() -> str:
    """The `/help` answer."""
    width = max(len(name) for name in COMMANDS) + 2
    lines = [f"  {name:<{width}}{text}" for name, text in COMMANDS.items()]
    return "commands:\n" + "\n".join(lines) + "\nanything else is sent to the agent."


async def run_chat(
    backend: ChatBackend,
    lines: AsyncIterator[str],
    *,
    make_printer: Callable[[], Any],
    verbose: bool = False,
) -> int:
    """Read lines and run them until `/exit` or end of input; returns the exit code (0)."""
    print(backend.banner)
    for line in await backend.unseen():
        print(line)
    async for raw in lines:
        text = raw.strip()
        if not text:
            continue
        command, _, rest = text.partition(" ")
        if command.startswith("/") and command not in SESSION_COMMANDS:
            if command in ("/exit", "/quit"):
                break
            await _local_command(backend, command, rest.strip(), verbose=verbose)
            continue
        printer = make_printer()
        try:
            answer = await backend.send(text, printer)
        except Exception as exc:  # a failed turn: one line, then the prompt again
            if getattr(printer, "mid_line", False):
                print()
            _report_failure(exc, verbose=verbose)
            continue
        if getattr(printer, "mid_line", False):
            print()
        if answer.interrupted:
            print("(interrupted)", file=sys.stderr)
        elif answer.command_message is not None:
            print(answer.command_message)
        elif answer.error:
            print(f"nodmix: error: {answer.error}", file=sys.stderr)
    return 0


async def _local_command(backend: ChatBackend, command: str, rest: str, *, verbose: bool) -> None:
    if command == "/help":
        print(help_text())
        return
    if command == "/status":
        from nodmix.runtime.status import format_status

        try:
            print(format_status(await backend.status(backend.model)))
        except Exception as exc:
            _report_failure(exc, verbose=verbose)
        return
    if command == "/model":
        await _switch_model(backend, rest, verbose=verbose)
        return
    print(f"unknown command {command} — /help lists commands", file=sys.stderr)


async def _switch_model(backend: ChatBackend, ref: str, *, verbose: bool) -> None:
    if not ref:
        try:
            status = await backend.status(backend.model)
        except Exception as exc:
            _report_failure(exc, verbose=verbose)
            return
        print(f"model: {status['model']} (switch with /model provider/model)")
        return
    try:
        status = await backend.status(ref)
    except Exception as exc:
        _report_failure(exc, verbose=verbose)
        return
    backend.model = ref
    print(f"model for this chat: {status['model']}")


def _report_failure(exc: BaseException, *, verbose: bool) -> None:
    if verbose:
        traceback.print_exception(exc)
    found = _first_nodmix_error(exc)
    if found is not None:
        from nodmix.cli.failure import one_line

        print(f"nodmix: error: {one_line(found)}", file=sys.stderr)
    else:
        print(f"nodmix: error: {type(exc).__name__}: {exc}", file=sys.stderr)


def _first_nodmix_error(exc: BaseException) -> NodmixError | None:
    if isinstance(exc, NodmixError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_nodmix_error(inner)
            if found is not None:
                return found
    return None
