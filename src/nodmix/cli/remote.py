"""`nodmix agent` through a running gateway, with a clear fallback to in-process runs."""

from __future__ import annotations

import argparse
import os
import sys

from nodmix.invocation import nodmix_command

DEFAULT_PORT = 18789


def gateway_url(args: argparse.Namespace) -> str:
    """`--url`, else the configured port on loopback."""
    if getattr(args, "url", None):
        return str(args.url).rstrip("/")
    from nodmix.config.loader import load_config

    port = load_config().config.gateway.port or DEFAULT_PORT
    return f"http://127.0.0.1:{port}"


def try_gateway(args: argparse.Namespace) -> int | None:
    """Run the command through the gateway, or return None to run it in process."""
    url = gateway_url(args)
    if not _reachable(url):
        if os.environ.get("NODMIX_AGENT_REQUIRE_GATEWAY"):
            from nodmix.errors import NodmixError

            raise NodmixError(
                f"no gateway is answering at {url}; start one with `{nodmix_command()} gateway`"
            )
        print(
            f"nodmix: no gateway at {url}; running in this process (--local skips this check)",
            file=sys.stderr,
        )
        return None
    from nodmix.gateway.client import run_remote

    return run_remote(args, url)


def _reachable(url: str) -> bool:
    import httpx2

    try:
        response = httpx2.get(f"{url}/health", timeout=0.5)
    except httpx2.HTTPError:
        return False
    return response.status_code == 200
