"""Fixtures for the gateway tests: a scripted model server, a config pointing at it, and an
`openai` client of a gateway whose model takes images."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.tool_then_answer import respond as tool_then_answer
from tests.gateway.support import openai_client, socket_gateway, vision_config, write_config


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """The `tool-then-answer` script on its own thread and socket (tests may swap `respond`)."""
    with ScriptedModelServer(tool_then_answer) as server:
        yield server


@pytest.fixture
def configured(isolated_state: Path, model_server: ScriptedModelServer) -> Path:
    """The state dir, with a config whose default model is the scripted server."""
    write_config(isolated_state, model_server.base_url)
    return isolated_state


@pytest.fixture
def vision_client(
    isolated_state: Path, model_server: ScriptedModelServer
) -> Iterator[openai.OpenAI]:
    """The official `openai` client of a real gateway (uvicorn) whose model takes images."""
    vision_config(isolated_state, model_server.base_url)
    with socket_gateway() as gateway, openai_client(gateway.url) as client:
        yield client
