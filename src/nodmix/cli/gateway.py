"""`nodmix gateway`: run the gateway (web page, OpenAI API, WebSocket) in the foreground."""

from __future__ import annotations

import argparse
import contextlib
import os
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

    add_parsers(p)


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

    from nodmix import __version__
    from nodmix.config.loader import load_config
    from nodmix.gateway.presence import announce
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

    presence = contextlib.ExitStack()

    def ready(bound: GatewaySettings, runtime: Runtime) -> None:
        collector.resume(args)
        presence.enter_context(announce(runtime.state_dir, url=bound.url, version=__version__))
        print(banner(bound, runtime), flush=True)

    with presence:
        anyio.run(lambda: serve_until_signal(settings, loaded=loaded, env=env, ready=ready))
    print("nodmix gateway stopped", flush=True)
    return 0
