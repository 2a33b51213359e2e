"""What `nodmix config set` (and `unset`) tells the user about a gateway that is already running."""

from __future__ import annotations

from nodmix.config.schema import NodmixConfig


def running_gateway_notice(before: NodmixConfig, key: str) -> str | None:
    """A line about the gateway running on the config as it was before the change, or None
    when no gateway answers there."""
    from nodmix.runtime.reconfigure import LIVE_SECTIONS

    url = answering_gateway(before)
    if url is None:
        return None
    section = key.split(".", 1)[0].split("[", 1)[0]
    if section not in LIVE_SECTIONS:  # gateway, channels, session, bindings, ...
        return f"the gateway running at {url} needs a restart to apply {key}"
    return f"the gateway running at {url} applies this within a few seconds"


def answering_gateway(config: NodmixConfig) -> str | None:
    """The URL of a gateway answering on this machine at the configured port, or None."""
    url = f"http://127.0.0.1:{config.gateway.port or 18789}"
    return url if _answers(url) else None


def _answers(url: str) -> bool:
    import httpx2

    try:
        response = httpx2.get(f"{url}/health", timeout=0.5)
    except httpx2.HTTPError:
        return False
    return response.status_code == 200
