"""Pieces shared by the command modules."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any


def common_parent() -> argparse.ArgumentParser:
    """A parent parser so `--verbose` also works after the subcommand name."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks and debug logging",
    )
    return parent


def print_json(value: Any) -> None:
    """Print a value as indented JSON on stdout."""
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def show_help_without_action(parser: argparse.ArgumentParser) -> None:
    """A command group run without an action prints its help and exits 2."""

    def show(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(handler=show)


def channel_checks(config: Any) -> tuple[Any, ...]:
    """The channel layer's audit checks (`nodmix.channels.audit`: owners, delivery targets;
    light, no platform library)."""
    from nodmix.channels.audit import CHANNEL_CHECKS

    return CHANNEL_CHECKS


def print_table(table: Sequence[Sequence[str]]) -> None:
    """Print rows as left-aligned columns."""
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


def positive_seconds(text: str) -> float:
    """argparse type of a timeout: a number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: use a number of seconds above 0")
    return value


def count(text: str) -> int:
    """argparse type of a how-many option: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use 0 or more")
    return value
