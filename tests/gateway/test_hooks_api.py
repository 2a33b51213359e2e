"""Webhooks through a real gateway: `POST /hooks/<name>` renders the mapping's message from
the JSON body, starts a turn and answers 202 with a run id; `GET /hooks/runs/<id>` reports
it. Unknown names get 404, bad bodies 400, oversized ones 413, missing tokens 401."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from nodmix.gateway import BackgroundGateway, GatewaySettings
from nodmix.gateway.hooks_api import MAX_UNFINISHED_RUNS
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.echo import respond as echo
from nodmix.testing.scripts.stalls import hang
from tests.automation.support import user_texts, write_config
from tests.gateway.support import NO_RETRY, TOKEN, wait_until

pytestmark = pytest.mark.integration
AUTH = {"authorization": f"Bearer {TOKEN}"}
HOOKS = {"mappings": {"mail": {"message": "New mail from {{body.from}}: {{body.subject}}"}}}


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(echo) as server:
        yield server


@pytest.fixture
def gateway(isolated_state: Path, model: ScriptedModelServer) -> Iterator[BackgroundGateway]:
    write_config(isolated_state, model.base_url, hooks=HOOKS)
    settings = GatewaySettings(port=0, token=TOKEN, max_body_bytes=4096)
    with BackgroundGateway(settings, retry=NO_RETRY) as running:
        yield running


def _post(gateway: BackgroundGateway, name: str, body: Any, **kw: Any) -> httpx2.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = kw.pop("headers", AUTH)
    return httpx2.post(f"{gateway.url}/hooks/{name}", content=data, headers=headers, **kw)


def test_a_webhook_post_starts_a_turn_and_its_run_can_be_looked_up(
    gateway: BackgroundGateway, model: ScriptedModelServer
) -> None:
    response = _post(gateway, "mail", {"from": "Anna", "subject": "Lunch?"})
    assert response.status_code == 202, response.text
    accepted = response.json()
    run_id = accepted["runId"]
    assert accepted["status"] == "accepted"
    assert accepted["sessionKey"] == f"hook:mail:{run_id}"

    def outcome() -> dict[str, Any]:
        got = httpx2.get(f"{gateway.url}/hooks/runs/{run_id}", headers=AUTH)
        assert got.status_code == 200, got.text
        return dict(got.json())

    wait_until(lambda: outcome()["status"] == "ok", what="the webhook run to finish")
    assert outcome()["reply"] == "New mail from Anna: Lunch?"
    assert outcome()["trigger"] == "webhook"
    assert user_texts(model) == ["New mail from Anna: Lunch?"]


def test_bad_webhook_requests_get_clear_errors_and_start_nothing(
    gateway: BackgroundGateway, model: ScriptedModelServer
) -> None:
    unknown = _post(gateway, "nope", {})
    assert unknown.status_code == 404 and "no webhook 'nope'" in unknown.text
    assert _post(gateway, "mail", b"{not json").status_code == 400
    not_object = _post(gateway, "mail", [1, 2])
    assert not_object.status_code == 400 and "JSON object" in not_object.text
    assert _post(gateway, "mail", {"subject": "x" * 10_000}).status_code == 413
    deep = _post(gateway, "mail", b'{"from":' + b"[" * 1500 + b"]" * 1500 + b"}")
    assert deep.status_code == 400 and "nested too deeply" in deep.text
    assert _post(gateway, "mail", {}, headers={}).status_code == 401
    missing = httpx2.get(f"{gateway.url}/hooks/runs/run_000000000000", headers=AUTH)
    assert missing.status_code == 404
    assert model.requests == []


def test_a_gateway_without_a_token_refuses_webhooks(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, hooks=HOOKS)
    open_gateway = GatewaySettings(port=0, token=None, auth_mode="none")
    with BackgroundGateway(open_gateway, retry=NO_RETRY) as running:
        refused = _post(running, "mail", {"subject": "x"}, headers={})
        assert refused.status_code == 403 and "gateway.auth.token" in refused.text
    assert model.requests == []


def test_a_hooks_token_without_a_gateway_token_is_refused_with_a_line_saying_so(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    write_config(isolated_state, model.base_url, hooks={**HOOKS, "token": "hook-secret-1"})
    hook_auth = {"authorization": "Bearer hook-secret-1"}
    open_gateway = GatewaySettings(port=0, token=None, auth_mode="none")
    with BackgroundGateway(open_gateway, retry=NO_RETRY) as running:
        refused = _post(running, "mail", {"subject": "x"}, headers=hook_auth)
    assert refused.status_code == 403
    message = refused.json()["error"]["message"]
    assert "NODMIX_GATEWAY_TOKEN" in message and "hooks.token alone is not enough" in message
    assert model.requests == []


def test_the_hooks_token_opens_the_webhook_paths_and_nothing_else(
    isolated_state: Path, model: ScriptedModelServer
) -> None:
    hooks = {**HOOKS, "token": "${HOOK_SECRET}"}
    write_config(isolated_state, model.base_url, hooks=hooks)
    os.environ["HOOK_SECRET"] = "hook-secret-0123456789"
    hook_auth = {"authorization": "Bearer hook-secret-0123456789"}
    settings = GatewaySettings(port=0, token=TOKEN, max_body_bytes=4096)
    try:
        with BackgroundGateway(settings, retry=NO_RETRY) as running:
            accepted = _post(running, "mail", {"from": "Anna"}, headers=hook_auth)
            assert accepted.status_code == 202, accepted.text
            run_id = accepted.json()["runId"]
            url = f"{running.url}/hooks/runs/{run_id}"
            wait_until(
                lambda: httpx2.get(url, headers=hook_auth).json().get("status") == "ok",
                what="the webhook run to finish",
            )
            chat = {"model": "nodmix", "messages": [{"role": "user", "content": "hi"}]}
            api = httpx2.post(f"{running.url}/v1/chat/completions", json=chat, headers=hook_auth)
            metrics = httpx2.get(f"{running.url}/metrics", headers=hook_auth)
            invoke = httpx2.post(
                f"{running.url}/tools/invoke", json={"tool": "read", "args": {}}, headers=hook_auth
            )
            wrong = _post(running, "mail", {}, headers={"authorization": "Bearer nope"})
    finally:
        del os.environ["HOOK_SECRET"]
    assert api.status_code == 401 and metrics.status_code == 401 and invoke.status_code == 401
    assert wrong.status_code == 401
    assert user_texts(model) == ["New mail from Anna: "]


def test_webhook_runs_that_pile_up_are_refused_with_429(isolated_state: Path) -> None:
    with ScriptedModelServer(hang) as stalled:
        write_config(
            isolated_state, stalled.base_url, hooks=HOOKS, automation={"maxConcurrentRuns": 1}
        )
        settings = GatewaySettings(port=0, token=TOKEN, max_body_bytes=4096)
        with BackgroundGateway(settings, retry=NO_RETRY) as running:
            statuses = [
                _post(running, "mail", {"subject": str(i)}).status_code
                for i in range(MAX_UNFINISHED_RUNS)
            ]
            refused = _post(running, "mail", {"subject": "one too many"})
    assert statuses == [202] * MAX_UNFINISHED_RUNS
    assert refused.status_code == 429 and "still unfinished" in refused.text
