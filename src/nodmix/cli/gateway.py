"""`nodmix gateway`: run the gateway (web page, OpenAI API, WebSocket) in the foreground."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from nodmix.cli import collector
from nodmix.cli.common import common_parent

if TYPE_CHECKING:
    from nodmix.gateway.settings import GatewaySettings
    from nodmix.runtime import Runtime


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `gateway` command."""
    p = sub.add_parser(
        "gateway",
        parents=[common_parent()],
        help="run the gateway (web page, OpenAI-compatible API, WebSocket)",
        description=(
            "Serve agents over HTTP and WebSocket until Ctrl-C or SIGTERM. Running turns get a "
            "grace period to finish on shutdown; a second Ctrl-C cancels them."
        ),
    )
    p.add_argument("--port", type=int, help="TCP port (default: gateway.port or 18789)")
    p.add_argument(
        "--bind",
        metavar="loopback|lan|ADDRESS",
        help="where to listen (default: gateway.bind or loopback); lan needs a token",
    )
    p.add_argument(
        "--token", help="bearer token clients must send (default: NODMIX_GATEWAY_TOKEN or config)"
    )
    p.set_defaults(handler=_run)
    from nodmix.cli.gateway_service import add_parsers

    actions = add_parsers(p)
    u = actions.add_parser(
        "url",
        parents=[common_parent()],
        help="print the web page's address with the token (for a browser on this machine)",
        description=(
            "Print the address of this state dir's running gateway's web page, with the "
            "token in the link's fragment (#token=...), which the browser keeps and never "
            "sends to the server. Treat the line like the token itself."
        ),
    )
    u.add_argument("--url", help="the gateway's address (default: the running gateway's)")
    u.add_argument("--token", help="the token (default: found like every command finds it)")
    u.set_defaults(handler=_url)


def _url(args: argparse.Namespace) -> int:
    from nodmix.cli.remote import find_gateway
    from nodmix.config.paths import state_dir as find_state_dir
    from nodmix.gateway.locate import elsewhere, page_url, probe

    target = find_gateway(args)
    found = probe(target)
    if not found.answering:
        print(f"nodmix: no gateway answers at {target.url}", file=sys.stderr)
    elif not found.ours:
        # A link with the token would hand it to whatever serves that page.
        print(f"nodmix: {elsewhere(target, find_state_dir())}", file=sys.stderr)
        print(page_url(target.url, None))
        return 1
    print(page_url(target.url, target.token))
    return 0


def _warn_missing_extras(config: object) -> None:
    """A line per configured optional part that runs without its extra (channels say so when
    the channel manager refuses to start them)."""
    import logging

    from nodmix.extras import hint, missing

    for row in missing(config):
        if not (row.config_key or "").startswith("channels."):
            logging.getLogger("nodmix.gateway").warning("%s", hint(row))


def _run(args: argparse.Namespace) -> int:
    import anyio

    from nodmix.config.loader import load_config
    from nodmix.gateway.server import banner, configure_logging, serve_until_signal
    from nodmix.gateway.settings import resolve_settings

    env = dict(os.environ)
    verbose = bool(getattr(args, "verbose", False))
    loaded = load_config(env=env)
    settings = resolve_settings(
        loaded.config.gateway,
        env,
        port=args.port,
        bind=args.bind,
        token=args.token,
        verbose=verbose,
    )
    configure_logging(verbose)
    _warn_missing_extras(loaded.config)

    def ready(bound: GatewaySettings, runtime: Runtime) -> None:
        collector.resume(args)
        # The token goes into the link only on a terminal, never into a service's log.
        print(banner(bound, runtime, show_token=sys.stdout.isatty()), flush=True)

    anyio.run(lambda: serve_until_signal(settings, loaded=loaded, env=env, ready=ready))
    print("nodmix gateway stopped", flush=True)
    return 0
