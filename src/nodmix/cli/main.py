"""Entry point of the `nodmix` command.

Each command group lives in its own module under `nodmix.cli` and exposes
`register(subparsers)`, which adds its parser and sets `handler` (a function taking the parsed
arguments and returning an exit code). Command modules import heavy dependencies inside their
handlers, so `nodmix --help` and the agent's start-up path stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nodmix import __version__
from nodmix.cli import collector

# Imported up front, not when a command fails: a process out of file descriptors could not
# load them then, and its one-line error would become a traceback.
from nodmix.cli.failure import exhaustion_line, is_interrupt, leaf_error, one_line

COMMAND_MODULES = (
    "agent",
    "approvals",
    "gateway",
    "sessions",
    "config",
    "doctor",
    "security",
    "mcp",
    "plugins",
    "sandbox",
    "skills",
    "web",
    "memory",
    "channels",
    "pairing",
    "message",
    "cron",
    "logs",
    "status",
    "state",
    "models",
    "onboard",
    "completion",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser. With `only`, just that command group is registered: a run that
    names its command does not import or build the others (start-up time matters)."""
    parser = argparse.ArgumentParser(
        prog="nodmix", description="Nodmix: a self-hosted AI agent gateway."
    )
    parser.add_argument("--version", action="version", version=f"nodmix {__version__}")
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="show tracebacks and debug logging"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(f"nodmix.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"nodmix.cli.{name}":
                continue  # command group not built yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in arguments or "-v" in arguments
    command = next((a for a in arguments if not a.startswith("-")), None)
    paused = argv is None and collector.pause(command)  # see nodmix.cli.collector
    try:
        return _main(arguments, command, collector_paused=paused)
    except BrokenPipeError:
        # stdout was closed early (`nodmix ... | head`): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # every failure ends as one line; --verbose adds the traceback
        return _fail(exc, verbose)
    except BaseExceptionGroup as group:
        if is_interrupt(group):
            print("nodmix: interrupted", file=sys.stderr)
            return 130
        return _fail(group, verbose)
    except KeyboardInterrupt:
        print("nodmix: interrupted", file=sys.stderr)
        return 130


def _fail(exc: BaseException, verbose: bool) -> int:
    if verbose:
        traceback.print_exception(exc)
    exhausted = exhaustion_line(exc)  # out of files or disk: say so and what to do
    print(f"nodmix: error: {exhausted or one_line(leaf_error(exc))}", file=sys.stderr)
    return 1


def _resolve_state(state_dir: Path) -> Any:
    from nodmix.state.backend import cli_resolver  # only when a command opens a store

    return cli_resolver(state_dir)


def _main(arguments: list[str], command: str | None, *, collector_paused: bool) -> int:
    parser = build_parser(command if command in COMMAND_MODULES else None)
    args = parser.parse_args(arguments)
    args.collector_paused = collector_paused
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    from nodmix import stores

    stores.set_resolver(_resolve_state)  # stores a command opens follow `state.backend`
    verbose = bool(getattr(args, "verbose", False))
    debug = any(k.startswith("NODMIX_DEBUG_") and v not in ("", "0") for k, v in os.environ.items())
    if verbose or debug:
        import logging

        # NODMIX_DEBUG_* traffic and code-mode logs are INFO records on `nodmix.*` loggers.
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("nodmix").setLevel(logging.DEBUG if verbose else logging.INFO)
    return int(handler(args))
