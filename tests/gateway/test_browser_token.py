"""The page link `nodmix gateway` (on a terminal) and `nodmix gateway url` print, in real
headless Chromium: it logs the page in, the page keeps the token and takes it out of the
address bar, and a page opened without it asks once (see `browser/token_link.spec.mjs`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import GatewayProcess, run_nodmix

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_the_banner_link_logs_the_page_in_and_the_page_asks_once_without_it(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    with GatewayProcess(configured) as gateway:  # no token configured: it makes its own
        link = run_nodmix(configured, "gateway", "url").stdout.strip()  # the banner's, too
        assert gateway.token is not None
        done = run_spec("token_link", gateway.url, GATEWAY_TOKEN=gateway.token, PAGE_URL=link)
    assert_steps_passed(done, 4)
