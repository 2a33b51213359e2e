"""Fixtures of the automation tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nodmix.testing.telegram_server import ScriptedBotAPI


@pytest.fixture
def api() -> Iterator[ScriptedBotAPI]:
    """A scripted Telegram Bot API on a real socket, for jobs that deliver to a chat."""
    with ScriptedBotAPI() as server:
        yield server
