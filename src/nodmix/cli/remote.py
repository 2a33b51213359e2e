"""`nodmix agent` through a running gateway, with a clear fallback to in-process runs."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from nodmix.cli import collector
from nodmix.invocation import nodmix_command

DEFAULT_PORT = 18789


def find_gateway(args: argparse.Namespace) -> Any:
    """This state dir's gateway and its token (`nodmix.gateway.locate`), honouring `--url`
    and `--token`."""
    from nodmix.config import paths
    from nodmix.config.loader import load_config
    from nodmix.gateway.locate import locate

    env = dict(os.environ)
    return locate(
        paths.state_dir(env),
        load_config(env=env).config,
        env,
        url=getattr(args, "url", None),
        token=getattr(args, "token", None),
    )


def gateway_url(args: argparse.Namespace) -> str:
    """`--url`, else the recorded gateway of this state dir, else the configured port."""
    return str(find_gateway(args).url)


def try_gateway(args: argparse.Namespace) -> int | None:
    """Run the command through the gateway, or return None to run it in process."""
    from nodmix.config import paths
    from nodmix.gateway.locate import elsewhere, probe

    target = find_gateway(args)
    found = probe(target, timeout=0.5 if target.source == "config" else 2.0)
    url = target.url
    if not found.ours:
        why = elsewhere(target, paths.state_dir()) if found.answering else f"no gateway at {url}"
        if os.environ.get("NODMIX_AGENT_REQUIRE_GATEWAY"):
            from nodmix.errors import NodmixError

            raise NodmixError(f"{why}; start one with `{nodmix_command()} gateway`")
        print(
            f"nodmix: {why}; running in this process (--local skips this check)",
            file=sys.stderr,
        )
        return None
    collector.resume(args)  # the gateway runs the turns; this process only talks to it
    if args.message is None:
        return _chat(args, url, target.token)
    from nodmix.cli.approval_prompt import ask_remote
    from nodmix.cli.printer import EventPrinter
    from nodmix.gateway.client import run_remote

    printer = EventPrinter(stream_text=not args.json)
    return run_remote(args, url, target.token, printer=printer, on_approval=ask_remote)


# ---- the chat through the gateway -------------------------------------------------------------


def _chat(args: argparse.Namespace, url: str, token: str | None) -> int:
    import anyio

    return anyio.run(_chat_async, args, url, token)


async def _chat_async(args: argparse.Namespace, url: str, token: str | None) -> int:
    from nodmix.cli.chat import chat_lines, run_chat
    from nodmix.cli.printer import EventPrinter
    from nodmix.gateway.client import GatewayClient

    async with GatewayClient.connect(url, token=token) as client:
        backend = RemoteChat(client, args, url)
        await backend.start()
        return await run_chat(
            backend,
            chat_lines(),
            make_printer=lambda: EventPrinter(stream_text=True),
            verbose=bool(getattr(args, "verbose", False)),
        )


class RemoteChat:
    """The chat's backend for turns run in a gateway (`agent` and `sessions.status`)."""

    def __init__(self, client: Any, args: argparse.Namespace, url: str) -> None:
        self.client = client
        self.args = args
        self.url = url
        self.model: str | None = args.model
        self.banner = ""

    async def start(self) -> None:
        """Ask the gateway which agent and session this chat talks to (checks both)."""
        status = await self.status(self.model)
        self.args.agent_id = status["agentId"]
        self.args.session_key = status["sessionKey"]
        self.banner = (
            f"nodmix chat with {status['agentName']} ({status['sessionKey']}) via the gateway "
            f"at {self.url}. /help lists commands, /exit or Ctrl-D quits."
        )
        self.client.listen("session", self._on_session)

    def _on_session(self, payload: dict[str, Any]) -> None:
        """A job posted into a session: print it if it is this chat's."""
        from nodmix.cli.chat import job_message_line, print_above_prompt

        if payload.get("kind") == "message" and payload.get("sessionKey") == self.args.session_key:
            print_above_prompt(job_message_line(payload))

    async def unseen(self) -> list[str]:
        """Messages jobs posted into this chat's session since the user last wrote."""
        from nodmix.cli.chat import new_job_messages
        from nodmix.gateway.client import GatewayError

        params = {"agentId": self.args.agent_id, "sessionKey": self.args.session_key}
        try:
            history = await self.client.request("sessions.history", {**params, "limit": 50})
        except GatewayError:
            return []  # a session with no transcript yet
        return new_job_messages(history.get("entries", []))

    async def send(self, text: str, printer: Any) -> Any:
        """Run one message in the gateway; Ctrl-C aborts the run there."""
        from nodmix.cli.approval_prompt import ask_remote
        from nodmix.cli.chat import Answer
        from nodmix.gateway.client import remote_turn, turn_params

        params = turn_params(self.args, text)
        if self.model:
            params["model"] = self.model
        answer, interrupted = await remote_turn(
            self.client, params, printer, on_approval=ask_remote
        )
        if interrupted or answer is None:
            return Answer(interrupted=True)
        if "command" in answer:
            return Answer(command_message=str(answer.get("message", "")))
        if not printer.streamed and answer.get("reply"):
            print(answer["reply"])
        if answer.get("stopReason") == "error":
            return Answer(error=answer.get("errorMessage") or "the model stopped with an error")
        return Answer()

    async def status(self, model: str | None) -> dict[str, Any]:
        """`/status` as the gateway reports it for this chat's session."""
        pairs = (
            ("agentId", self.args.agent_id),
            ("sessionKey", self.args.session_key),
            ("model", model),
        )
        params = {key: value for key, value in pairs if value}
        status: dict[str, Any] = await self.client.request("sessions.status", params)
        return status
