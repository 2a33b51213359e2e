"""`nodmix web`: install and inspect the web page's Markdown renderer and sanitizer."""

from __future__ import annotations

import argparse

from nodmix.cli.common import common_parent
from nodmix.invocation import nodmix_command


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `nodmix web install` and `nodmix web status`."""
    parser = sub.add_parser(
        "web",
        parents=[common_parent()],
        help="install or inspect the web page's scripts (Markdown renderer, sanitizer)",
        description=(
            "The web page renders replies with marked and sanitises them with DOMPurify, both "
            "fetched from the npm registry ($NODMIX_NPM_REGISTRY overrides it), hash-verified "
            "and kept in the cache directory ($NODMIX_CACHE_DIR)."
        ),
    )
    actions = parser.add_subparsers(dest="web_command", metavar="ACTION")
    install = actions.add_parser(
        "install", parents=[common_parent()], help="download and verify the scripts (idempotent)"
    )
    install.add_argument(
        "--force", action="store_true", help="download again even if verified copies exist"
    )
    install.set_defaults(handler=_install)
    status = actions.add_parser(
        "status", parents=[common_parent()], help="show whether the scripts are installed"
    )
    status.set_defaults(handler=_status)
    parser.set_defaults(handler=lambda _args: _help(parser))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _install(args: argparse.Namespace) -> int:
    from nodmix.gateway import webassets

    for line in webassets.install(force=bool(args.force)):
        print(line)
    return 0


def _status(args: argparse.Namespace) -> int:
    from nodmix.gateway import webassets

    absent = webassets.missing()
    for package in webassets.PACKAGES:
        state = "NOT INSTALLED" if package.label in absent else "installed"
        print(f"{package.label}: {state} ({package.directory()})")
    if absent:
        print(
            f"fix: run `{nodmix_command()} web install`"
            " (the page shows replies as plain text until then)"
        )
    return 1 if absent else 0
