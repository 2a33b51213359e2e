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

from nodmix import __version__
from nodmix.errors import NodmixError, resource_exhaustion

COMMAND_MODULES = (
    "agent",
    "gateway",
    "sessions",
    "config",
    "doctor",
    "mcp",
    "plugins",
    "sandbox",
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


def _first_nodmix_error(group: BaseExceptionGroup[BaseException]) -> NodmixError | None:
    """The first Nodmix error inside an exception group (task groups wrap what they raise)."""
    for exc in group.exceptions:
        if isinstance(exc, NodmixError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_nodmix_error(exc)
            if found is not None:
                return found
    return None


def _first_exhaustion(group: BaseExceptionGroup[BaseException]) -> str | None:
    """The line for the first out-of-files or out-of-disk error inside an exception group."""
    for exc in group.exceptions:
        found = (
            _first_exhaustion(exc)
            if isinstance(exc, BaseExceptionGroup)
            else resource_exhaustion(exc)
        )
        if found is not None:
            return found
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in arguments if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMAND_MODULES else None)
    args = parser.parse_args(arguments)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    verbose = bool(getattr(args, "verbose", False))
    debug = any(k.startswith("NODMIX_DEBUG_") and v not in ("", "0") for k, v in os.environ.items())
    if verbose or debug:
        import logging

        # NODMIX_DEBUG_* traffic and code-mode logs are INFO records on `nodmix.*` loggers.
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("nodmix").setLevel(logging.DEBUG if verbose else logging.INFO)
    try:
        return int(handler(args))
    except BaseExceptionGroup as group:
        first = _first_nodmix_error(group)
        exhausted = _first_exhaustion(group)
        if first is None and exhausted is None:
            raise
        if verbose:
            traceback.print_exc()
        print(f"nodmix: error: {exhausted or first}", file=sys.stderr)
        return 1
    except NodmixError as exc:
        if verbose:
            traceback.print_exc()
        print(f"nodmix: error: {resource_exhaustion(exc) or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("nodmix: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout was closed early (`nodmix ... | head`): not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        exhausted = resource_exhaustion(exc)  # out of files or disk: one line, not a traceback
        if exhausted is None or verbose:
            raise
        print(f"nodmix: error: {exhausted}", file=sys.stderr)
        return 1
