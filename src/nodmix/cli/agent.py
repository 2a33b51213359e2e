"""`nodmix agent`: one turn (`-m TEXT`) or an interactive chat, in process or via the gateway."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from nodmix.cli import collector
from nodmix.cli.common import common_parent
from nodmix.cli.printer import EventPrinter


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `agent` command."""
    p = sub.add_parser(
        "agent",
        parents=[common_parent()],
        help="talk to an agent (one message or a chat)",
        description="Send one message with -m, or start an interactive chat without it.",
    )
    p.add_argument(
        "-m",
        "--message",
        help="the message ('-' reads it from stdin); without it a chat starts, or piped stdin "
        "is the message",
    )
    p.add_argument(
        "--chat",
        action="store_true",
        help="chat even when stdin is not a terminal (one message per line)",
    )
    p.add_argument("--local", action="store_true", help="run in this process, not via a gateway")
    p.add_argument("--agent", dest="agent_id", help="agent id (default: main)")
    p.add_argument("--session-key", help="session key, e.g. agent:main:work or just work")
    p.add_argument("--model", help="model for this turn, provider/model")
    p.add_argument(
        "--no-tools", action="store_true", help="no tools for this run: the model just answers"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object with the outcome")
    p.add_argument("--url", help="gateway URL (default: from config, http://127.0.0.1:18789)")
    p.add_argument("--token", help="gateway token (default: NODMIX_GATEWAY_TOKEN or config)")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    if args.chat and args.message is not None:  # the command line itself: a usage error
        print(
            "nodmix: error: --chat and -m do not go together: -m sends one message, --chat "
            "starts a chat",
            file=sys.stderr,
        )
        return 2
    problem = _read_message(args)
    if problem is not None:
        print(f"nodmix: error: {problem}", file=sys.stderr)
        return 1
    if not args.local:
        from nodmix.cli import remote

        outcome = remote.try_gateway(args)
        if outcome is not None:
            return outcome
    import anyio

    if args.message is None:
        return anyio.run(_chat, args)
    return anyio.run(_one_turn, args)


def _read_message(args: argparse.Namespace) -> str | None:
    """Settle `args.message`: `-m -` and piped stdin (without -m) are one message read from
    stdin. Returns why the message cannot be sent (it is empty), or None."""
    piped = args.message is None and not args.chat and not sys.stdin.isatty()
    if args.message == "-" or piped:
        args.message = sys.stdin.read().rstrip("\n")  # `echo text |` ends in a newline
        source = "stdin"
    else:
        source = "-m"
    if args.message is not None and not args.message.strip():
        return f"the message from {source} is empty; nothing was sent"
    return None


# ---- in-process -----------------------------------------------------------------------------


async def _one_turn(args: argparse.Namespace) -> int:
    import anyio

    from nodmix.runtime import Runtime

    printer = EventPrinter(stream_text=not args.json)
    async with Runtime.open(one_conversation=True) as runtime:
        collector.resume(args)
        _ask_on_terminal(runtime)
        outcome: Any = None

        async def turn() -> None:
            nonlocal outcome
            outcome = await runtime.submit(
                args.message,
                agent_id=args.agent_id,
                session_key=args.session_key,
                emit=printer,
                model=args.model,
                disable_tools=args.no_tools,
            )

        interrupted = await _cancellable(turn)
        if interrupted:
            print("\nnodmix: turn interrupted; the transcript was kept", file=sys.stderr)
            return 130
        if runtime.subagents.open_runs() and printer.mid_line:
            print()
            printer.mid_line = False
        await _await_subagents(runtime, quiet=args.json)
    await anyio.lowlevel.checkpoint()
    return _report(outcome, args, printer)


def _report(outcome: Any, args: argparse.Namespace, printer: EventPrinter) -> int:
    from nodmix.runtime import CommandOutcome

    if isinstance(outcome, CommandOutcome):
        if args.json:
            _print_json(outcome.to_json())
        else:
            print(outcome.message)
        return 0
    result = outcome.result
    if args.json:
        _print_json(outcome.to_json())
    else:
        if printer.mid_line:
            print()
        if not printer.streamed and result.reply:
            print(result.reply)
    return 0 if result.stop_reason not in ("error",) else 1


async def _chat(args: argparse.Namespace) -> int:
    from nodmix.cli.chat import chat_lines, run_chat
    from nodmix.runtime import Runtime

    async with Runtime.open(one_conversation=True) as runtime:
        collector.resume(args)
        _ask_on_terminal(runtime)
        backend = LocalChat(runtime, args)
        return await run_chat(
            backend,
            chat_lines(),
            make_printer=lambda: EventPrinter(stream_text=True),
            verbose=bool(getattr(args, "verbose", False)),
        )


async def _await_subagents(runtime: Any, *, quiet: bool) -> None:
    """Before a one-message run ends, wait for the subagents it started without waiting (they
    run in this process), printing each result as it lands; Ctrl-C leaves them to the next
    gateway start, which continues them."""
    from nodmix.cli.chat import announcement_line

    count = sum(1 for run in runtime.subagents.open_runs() if not run.wait)
    if not count:
        return
    if not quiet:
        plural = "s" if count > 1 else ""
        print(f"waiting for {count} subagent{plural} (Ctrl-C leaves them to the gateway)…")
        runtime.subagents.listeners.append(lambda post: print(announcement_line(post)))
    if await _cancellable(runtime.subagents.settle):
        print("\nnodmix: the gateway finishes the subagents when it next starts", file=sys.stderr)


def _ask_on_terminal(runtime: Any) -> None:
    """Approval requests of this process's turns are asked on the terminal (y/n/always); the
    prompt is set up when the security parts are built (a turn without `exec` never does)."""

    def register(security: Any) -> None:
        from nodmix.cli.approval_prompt import TerminalPresenter

        security.broker.router.register("owner", TerminalPresenter())

    runtime.when_security(register)


class LocalChat:
    """The chat's backend for turns run in this process."""

    def __init__(self, runtime: Any, args: argparse.Namespace) -> None:
        self.runtime = runtime
        self.agent = runtime.agent(args.agent_id)
        self.key: str = runtime.session_key(self.agent, args.session_key)
        self.model: str | None = args.model
        self.no_tools = bool(args.no_tools)
        self.banner = (
            f"nodmix chat with {self.agent.name} ({self.key}). "
            "/help lists commands, /exit or Ctrl-D quits."
        )
        runtime.subagents.listeners.append(self._announced)

    def _announced(self, post: Any) -> None:
        """A subagent's result landed in a session: print it if it is this chat's."""
        from nodmix.cli.chat import announcement_line, print_above_prompt

        if post.session_key == self.key:
            print_above_prompt(announcement_line(post))

    async def unseen(self) -> list[str]:
        """Messages jobs posted into this chat's session since the user last wrote."""
        from nodmix.cli.chat import new_job_messages
        from nodmix.errors import SessionError
        from nodmix.sessions.entries import entry_to_builtins

        try:
            session = self.runtime.sessions.open(self.key, create=False)
        except SessionError:
            return []
        return new_job_messages([entry_to_builtins(e) for e in session.entries[-50:]])

    async def send(self, text: str, printer: EventPrinter) -> Any:
        """Run one message in process; Ctrl-C cancels the turn."""
        from nodmix.cli.chat import Answer
        from nodmix.runtime import CommandOutcome

        outcome: Any = None

        async def turn() -> None:
            nonlocal outcome
            outcome = await self.runtime.submit(
                text,
                agent_id=self.agent.id,
                session_key=self.key,
                emit=printer,
                model=self.model,
                disable_tools=self.no_tools,
            )

        if await _cancellable(turn):
            return Answer(interrupted=True)
        if isinstance(outcome, CommandOutcome):
            return Answer(command_message=outcome.message)
        result = outcome.result
        if not printer.streamed and result.reply:
            print(result.reply)
        if result.stop_reason != "error":
            return Answer()
        error = result.last_message.error_message if result.last_message else None
        return Answer(error=error or "the model stopped with an error")

    async def status(self, model: str | None) -> dict[str, Any]:
        """`/status` of this chat's session."""
        from nodmix.runtime.status import session_status

        return session_status(
            self.runtime, agent_id=self.agent.id, session_key=self.key, model=model
        )


async def _cancellable(body: Any) -> bool:
    """Run `body()`, cancelling it cleanly on Ctrl-C; returns True when it was interrupted."""
    import signal

    import anyio

    interrupted = False
    failure: BaseException | None = None
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    interrupted = True
                    group.cancel_scope.cancel()
                    return

        async def work() -> None:
            nonlocal failure
            try:
                await body()
            except Exception as exc:  # re-raised below, outside the task group's wrapping
                failure = exc
            group.cancel_scope.cancel()

        group.start_soon(watch)
        group.start_soon(work)
    if failure is not None:
        raise failure
    return interrupted


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
