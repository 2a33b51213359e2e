"""What `nodmix config set` (and `unset`) tells the user about a gateway that is already running."""

from __future__ import annotations

import os
from pathlib import Path

from nodmix.config.schema import NodmixConfig


def running_gateway_notice(before: NodmixConfig, key: str) -> str | None:
    """A line about this state dir's gateway running on the config as it was before the
    change (or about a gateway on the configured port that serves another state dir, which
    will not see it), or None when no gateway answers."""
    from nodmix.runtime.reconfigure import LIVE_SECTIONS

    found = _find(before)
    if found is None:
        return None
    url, ours = found
    if not ours:
        from nodmix.config import paths

        return (
            f"the gateway answering at {url} serves another state dir and will not see this "
            f"change; no gateway of {paths.state_dir()} is running"
        )
    section = key.split(".", 1)[0].split("[", 1)[0]
    if section not in LIVE_SECTIONS:  # gateway, channels, session, bindings, ...
        return f"the gateway running at {url} needs a restart to apply {key}"
    return f"the gateway running at {url} applies this within a few seconds"


def answering_gateway(config: NodmixConfig) -> str | None:
    """The URL of this state dir's gateway when it answers (found like every command finds
    it: `nodmix.gateway.locate`), or None."""
    found = _find(config)
    return found[0] if found is not None and found[1] else None


def _find(config: NodmixConfig) -> tuple[str, bool] | None:
    from nodmix.config import paths
    from nodmix.gateway.locate import locate, probe

    env = dict(os.environ)
    state: Path = paths.state_dir(env)
    target = locate(state, config, env)
    found = probe(target, timeout=0.5 if target.source == "config" else 2.0)
    if not found.answering:
        return None
    return target.url, found.ours
