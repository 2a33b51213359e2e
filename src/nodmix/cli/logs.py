"""`nodmix logs [-f] [--level L] [--since T] [--json]`: the structured log of the state dir."""

from __future__ import annotations

import argparse
import json
import sys

from nodmix.cli.common import common_parent, count


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `logs` command."""
    p = sub.add_parser(
        "logs",
        parents=[common_parent()],
        help="show (and follow) the gateway's and agents' structured log",
        description=(
            "Print records of <state dir>/logs/nodmix.log (JSON lines, rotated at 5 MB). "
            "With -f, keep printing new records as they are written until Ctrl-C."
        ),
    )
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new records")
    p.add_argument(
        "--level", default="info", help="lowest level shown: debug|info|warning|error (info)"
    )
    p.add_argument("--since", help="only records since a duration ago (10m, 2h, 1d) or a time")
    p.add_argument(
        "-n", "--lines", type=count, default=100, help="how many past records (default 100)"
    )
    p.add_argument("--json", action="store_true", help="print the JSON records as they are")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from nodmix.config import paths
    from nodmix.observability.logread import (
        LogFilter,
        follow,
        format_text,
        parse_level,
        parse_since,
        read_records,
    )
    from nodmix.observability.logs import log_file

    keep = LogFilter(
        min_level=parse_level(args.level),
        since=parse_since(args.since) if args.since else None,
    )
    path = log_file(paths.state_dir())

    def show(record: dict[str, object]) -> None:
        line = json.dumps(record, ensure_ascii=False) if args.json else format_text(record)
        print(line, flush=args.follow)

    last = None if args.since else max(0, args.lines)
    for record in read_records(path, keep, last=last):
        show(record)
    if not args.follow:
        if not path.is_file():
            print(f"no log yet at {path} (the gateway writes it once it runs)", file=sys.stderr)
        return 0
    try:
        for record in follow(path, keep):
            show(record)
    except KeyboardInterrupt:
        pass
    return 0
