"""Webhooks: `POST /hooks/<name>` runs the turn `hooks.mappings.<name>` describes, with the
message rendered from the JSON body (`{{body.subject}}`), and answers 202 with a run id at
once; `GET /hooks/runs/<id>` reports the run (`running`, `ok`, `error`, `timeout`).

Webhooks need the gateway token or `hooks.token` (`Authorization: Bearer`, checked by the
guard middleware; `hooks.token` opens the webhook paths only); a gateway without a gateway
token refuses them. Bodies are bounded by
`gateway.maxBodyBytes` (413). A body that is not a JSON object gets 400, an unknown name 404.
Runs go through the automation runner (its concurrency cap and per-run timeout) with a
`webhook` origin; each is recorded in the run history as job `hook-<name>`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from nodmix.automation.jobs import Job
from nodmix.automation.runner import RunPlan, new_run_id
from nodmix.automation.schedule import Schedule
from nodmix.automation.templates import render
from nodmix.config.loader import resolve_secret
from nodmix.errors import NodmixError
from nodmix.gateway.errors import APIError, bad_request, not_found
from nodmix.gateway.limits import decode_json
from nodmix.gateway.state import Gateway, gateway_of
from nodmix.origin import TurnOrigin

log = logging.getLogger("nodmix.automation")

MAX_TRACKED_RUNS = 1000
MAX_UNFINISHED_RUNS = 100
"""Webhook runs accepted and not yet finished (running or waiting for a slot); more get 429,
so a caller posting in a loop cannot pile up turns and memory without end."""
_BODY: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class HookRuns:
    """Which job each recent webhook run id belongs to (bounded, oldest forgotten first)."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[str, str] = OrderedDict()
        self.unfinished = 0

    def add(self, run_id: str, job_id: str) -> None:
        self._jobs[run_id] = job_id
        while len(self._jobs) > MAX_TRACKED_RUNS:
            self._jobs.popitem(last=False)

    def job_of(self, run_id: str) -> str | None:
        return self._jobs.get(run_id)


def hook_token(gateway: Gateway) -> str | None:
    """The current `hooks.token` (None when unset, or when its variable is not set)."""
    token = gateway.runtime.config.hooks.token
    try:
        return resolve_secret(token, key="hooks.token", env=gateway.runtime.env) or None
    except NodmixError:
        return None


def _runs(request: Request) -> HookRuns:
    state = request.app.state
    if not hasattr(state, "hook_runs"):
        state.hook_runs = HookRuns()
    runs: HookRuns = state.hook_runs
    return runs


def _unavailable(message: str, code: str) -> APIError:
    return APIError(status=503, message=message, kind="api_error", code=code)


async def post_hook(request: Request) -> Response:
    """Start the mapped turn and answer 202 `{runId, status}`."""
    gateway = gateway_of(request)
    if not gateway.settings.token:
        also = "; hooks.token alone is not enough" if hook_token(gateway) else ""
        raise APIError(
            status=403,
            message="webhooks need a gateway token (gateway.auth.token or NODMIX_GATEWAY_TOKEN)"
            + also,
            kind="permission_error",
            code="token_required",
        )
    name = request.path_params["name"]
    mapping = gateway.runtime.config.hooks.mappings.get(name)
    if mapping is None or not set(name) <= _NAME_CHARS:
        raise not_found(f"no webhook {name!r} (hooks.mappings)", code="unknown_hook")
    raw = await request.body()
    body: Any = decode_json(_BODY, raw) if raw.strip() else {}
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        text = render(mapping.message, {"body": body, "name": name})
    except RecursionError:
        raise bad_request("the request body is nested too deeply") from None
    if not text.strip():
        raise bad_request("the webhook message rendered empty")
    runner = gateway.runtime.automation.runner
    if runner is None:
        raise _unavailable("the gateway is not running automation", "not_serving")
    runs = _runs(request)
    if runs.unfinished >= MAX_UNFINISHED_RUNS:
        raise APIError(
            status=429,
            message=f"{MAX_UNFINISHED_RUNS} webhook runs are still unfinished; try again later",
            kind="rate_limit_error",
            code="too_many_runs",
        )
    _check_deliver(gateway, name, mapping.deliver)
    agent = gateway.agent(mapping.agent_id)
    run_id = new_run_id()
    session = mapping.session_key or f"hook:{name}:{run_id}"
    gateway.session_key(agent, session)  # 400 for a malformed mapping key, before accepting
    job = Job(
        id=f"hook-{name}",
        name=f"webhook {name}",
        schedule=Schedule(kind="at", at=0.0),
        message=mapping.message,
        created_at=0.0,
        agent_id=agent.id,
        deliver=mapping.deliver,
        model=mapping.model,
    )
    plan = RunPlan(
        trigger="webhook",
        text=text,
        session_key=session,
        origin=TurnOrigin(
            channel="webhook",
            chat_id=name,
            memory=f"webhook:{name}" in gateway.runtime.config.memory.share_with,
        ),
        exclusive=False,
    )

    async def run() -> None:
        try:
            await runner.run(job, plan, run_id)
        finally:
            runs.unfinished -= 1

    runs.unfinished += 1
    if not gateway._start_background(run):
        runs.unfinished -= 1
        raise _unavailable("the gateway is shutting down", "shutting_down")
    runs.add(run_id, job.id)
    return JSONResponse(
        {"runId": run_id, "status": "accepted", "hook": name, "sessionKey": session},
        status_code=202,
    )


def _check_deliver(gateway: Gateway, name: str, deliver: str | None) -> None:
    """Refuse a call whose mapping delivers where the channel's rules do not allow (checked
    per call: the rules and the pairings change), before a turn is spent on it.

    Raises:
        APIError: 409 naming the mapping and the rule.
    """
    from nodmix.automation.jobs import parse_target, session_target

    if deliver is None or session_target(deliver) is not None:
        return
    channel, to = parse_target(deliver)
    refused = gateway.runtime.channel_access.deliver_refusal(channel, to, None)
    if refused is not None:
        log.warning("webhook %s refused: hooks.mappings.%s.deliver: %s", name, name, refused)
        raise APIError(
            status=409,
            message=f"hooks.mappings.{name}.deliver: {refused}",
            kind="invalid_request_error",
            code="deliver_not_allowed",
        )


async def get_hook_run(request: Request) -> Response:
    """A webhook run's record."""
    gateway = gateway_of(request)
    run_id = request.path_params["run_id"]
    job_id = _runs(request).job_of(run_id)
    record = None
    if job_id is not None:
        history = gateway.runtime.automation.history
        record = await anyio.to_thread.run_sync(history.find, job_id, run_id)
    if record is None:
        if job_id is not None:
            return JSONResponse({"runId": run_id, "status": "queued"})
        raise not_found(f"no webhook run {run_id!r}", code="unknown_run")
    return JSONResponse(record.to_json())
