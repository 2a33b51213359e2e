"""The whole turn "search, open the first result, fill its form, report what the page says":
the scripted model (`web-task`) over real HTTP, the scripted search server, real Chromium and
the local test site, with and without code mode; and no tools without their config."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.config import load_config
from nodmix.events import ToolProgress
from nodmix.runtime import Runtime
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.web_task import respond
from nodmix.testing.search_server import Hit, ScriptedSearchServer
from nodmix.testing.web_site import TestSite

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture(scope="module")
def site() -> Iterator[TestSite]:
    with TestSite() as running:
        yield running


def _config(state: Path, model: str, tools: dict[str, Any], *, vision: bool = False) -> Path:
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": model,
                    "apiKey": "test-key",
                    "models": [
                        {"id": "scripted", **({"input": ["text", "image"]} if vision else {})}
                    ],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "local/scripted"}}},
        "tools": tools,
    }
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.mark.anyio
@pytest.mark.parametrize("code_mode", [False, True], ids=["direct", "code-mode"])
async def test_search_open_fill_and_report(
    isolated_state: Path, site: TestSite, code_mode: bool
) -> None:
    hits = [Hit("Contact the team", site.url("/form"), "Write to us."), Hit("Other", site.url())]
    with ScriptedSearchServer(hits) as search:
        async with ScriptedModelServer(respond) as model:
            tools: dict[str, Any] = {
                "web": {"search": {"provider": "brave", "apiKey": "${BRAVE_KEY}",
                                   "baseUrl": search.url}},
                "browser": {"enabled": True, "allowHosts": ["127.0.0.1"], "timeoutSeconds": 10},
            }  # fmt: skip
            if code_mode:
                tools["codeMode"] = True
            path = _config(isolated_state, model.base_url, tools)
            env = {**os.environ, "NODMIX_STATE_DIR": str(isolated_state), "BRAVE_KEY": "k-9"}
            events: list[Any] = []
            async with Runtime.open(load_config(path), env=env) as runtime:
                outcome = await runtime.run_turn(
                    "search contact form and send the form as Grace", emit=events.append
                )
    reply = outcome.result.reply
    assert "Thanks, Grace! Your favourite colour is red. Reference CONF-4711." in reply
    assert site.submissions[-1]["name"] == "Grace"
    assert search.requests[-1].query == "contact form" and search.requests[-1].key == "k-9"
    offered = {t["function"]["name"] for t in model.requests[0].body["tools"]}
    assert offered == ({"exec", "wait"} if code_mode else offered | {"web_search", "browser"})
    progress = [e.text for e in events if isinstance(e, ToolProgress)]
    assert f"opening {site.url('/form')}" in progress


@pytest.mark.anyio
async def test_without_config_neither_tool_is_offered(isolated_state: Path) -> None:
    async with ScriptedModelServer(respond) as model:
        path = _config(isolated_state, model.base_url, {"browser": {"enabled": False}})
        env = {**os.environ, "NODMIX_STATE_DIR": str(isolated_state)}
        async with Runtime.open(load_config(path), env=env) as runtime:
            await runtime.run_turn("hello")
    offered = {t["function"]["name"] for t in model.requests[0].body["tools"]}
    assert "web_search" not in offered and "browser" not in offered and "read" in offered


@pytest.mark.anyio
async def test_a_screenshot_reaches_a_vision_model_as_an_image(
    isolated_state: Path, site: TestSite
) -> None:
    from nodmix.messages import ToolResultMessage
    from nodmix.providers.base import ModelRequest
    from nodmix.providers.fake import ModelReply

    def look(request: ModelRequest) -> ModelReply:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        if not results:
            return ModelReply.tool_call("browser", {"action": "navigate", "url": site.url("/form")})
        if len(results) == 1:
            return ModelReply.tool_call("browser", {"action": "screenshot"})
        return ModelReply.text("I see the form.")

    async with ScriptedModelServer(look) as model:
        tools = {"browser": {"enabled": True, "allowHosts": ["127.0.0.1"]}}
        path = _config(isolated_state, model.base_url, tools, vision=True)
        env = {**os.environ, "NODMIX_STATE_DIR": str(isolated_state)}
        async with Runtime.open(load_config(path), env=env) as runtime:
            outcome = await runtime.run_turn("look at the form")
            workspace = runtime.agent("main").workspace
    assert outcome.result.reply == "I see the form."
    sent = json.dumps(model.requests[-1].body["messages"])
    assert '"image_url"' in sent and "data:image/png;base64," in sent
    assert list((workspace / "browser").glob("screenshot-*.png"))
