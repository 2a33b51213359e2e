"""`nodmix pairing` and `nodmix channels list` as a user types them, without a gateway."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_nodmix
from tests.support.config import write_config

pytestmark = pytest.mark.integration


def _telegram(state: Path) -> None:
    # The commands read the config and the state directory only: nothing is contacted.
    extra = "channels: { telegram: { botToken: '123:abc', apiBaseUrl: 'http://127.0.0.1:9' } }"
    write_config(state, "http://127.0.0.1:9/v1", extra)


def test_a_misspelt_channel_is_refused_with_the_configured_ones(isolated_state: Path) -> None:
    _telegram(isolated_state)
    for action in (("approve", "telegrm", "K7MX2QPA"), ("revoke", "telgram", "42")):
        done = run_nodmix(isolated_state, "pairing", *action)
        assert done.returncode == 1, done.stdout
        assert done.stderr.strip() == (
            f"nodmix: error: no channel '{action[1]}' (channels: telegram)"
        )
    known = run_nodmix(isolated_state, "pairing", "approve", "telegram", "K7MX2QPA")
    assert known.returncode == 1
    assert "no pending pairing request on telegram has code 'K7MX2QPA'" in known.stderr


def test_channels_list_says_whether_a_mention_is_required_in_words(isolated_state: Path) -> None:
    _telegram(isolated_state)
    listed = run_nodmix(isolated_state, "channels", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == (
        "telegram  enabled  dm: pairing  groups: allowlist (0 listed)  mention required: yes"
    )


def test_approving_an_owner_says_a_running_gateway_needs_a_restart_to_see_it(
    isolated_state: Path,
) -> None:
    from nodmix.channels.pairing import PairingStore

    from ..gateway.support import GatewayProcess

    _telegram(isolated_state)
    request, _ = PairingStore(isolated_state).request("telegram", "4242", sender_name="Ann")
    assert request is not None
    with GatewayProcess(isolated_state) as gateway:
        done = run_nodmix(isolated_state, "pairing", "approve", "telegram", request.code, "--owner")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"the gateway running at {gateway.url} needs a restart to apply channels.telegram.ownerIds"
    )
