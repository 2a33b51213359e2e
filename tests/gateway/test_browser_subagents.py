"""A subagent started from the web page, in real headless Chromium (see
`browser/subagents.spec.mjs`): real gateway, the `subagents` scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import socket_gateway, write_config

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_a_subagent_is_nested_under_its_parent_and_its_result_shows_in_the_page(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(respond) as model:
        write_config(isolated_state, model.base_url)
        with socket_gateway() as gateway:
            done = run_spec("subagents", gateway.url)
    assert_steps_passed(done, 4)
