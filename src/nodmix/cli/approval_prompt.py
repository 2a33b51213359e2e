"""The CLI's approval prompt: a y/n/always question on the terminal.

`TerminalPresenter` serves turns run in this process (`nodmix agent --local`, the local chat);
`ask_remote` serves turns `nodmix agent` runs in a gateway (it answers with
`approvals.resolve`). A batch (several commands of one code-mode program) is shown as one list
and answered once for all of them. End of input or an unreadable answer counts as no.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import TYPE_CHECKING, Any

import anyio

from nodmix.security.approvals import Answer, ApprovalBatch, ApprovalBroker

if TYPE_CHECKING:
    from nodmix.gateway.client import GatewayClient

QUESTION = "Run it? [y]es / [n]o / [a]lways allow: "
_ANSWERS: dict[str, Answer] = {
    "y": "allow-once",
    "yes": "allow-once",
    "a": "allow-always",
    "always": "allow-always",
    "n": "deny",
    "no": "deny",
}


def describe(requests: list[dict[str, Any]]) -> str:
    """The text shown above the question (requests in their wire shape)."""
    first = requests[0]
    lines = [
        f"Approval needed ({first['reason']}) for agent {first['agentId']}, "
        f"session {first['sessionKey']}:"
    ]
    for req in requests:
        lines.append(f"  [{req['id']}] {req['command']}")
        lines.append(f"         in {req['cwd']}")
    if len(requests) > 1:
        lines.append(f"The answer applies to all {len(requests)} commands.")
    return "\n".join(lines)


def _ask() -> str:
    sys.stderr.write(QUESTION)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not sys.stdin.isatty():  # a piped answer is not echoed: show it, end the line
        sys.stderr.write(line if line.endswith("\n") else line + "\n")
        sys.stderr.flush()
    if not line:
        return ""
    return line.strip().lower()


async def _read_answer() -> str:
    """`_ask()` on a daemon thread: an unanswered prompt must not keep the process alive."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(text: str) -> None:
        if not future.done():
            future.set_result(text)

    def work() -> None:
        try:
            text = _ask()
        except (OSError, ValueError):
            text = ""
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, text)

    threading.Thread(target=work, name="nodmix-approval-prompt", daemon=True).start()
    return await future


async def _answer(requests: list[dict[str, Any]]) -> Answer:
    print(describe(requests), file=sys.stderr)
    while True:
        text = await _read_answer()
        answer = _ANSWERS.get(text)
        if answer is not None:
            return answer
        if not text:
            return "deny"
        print("Please answer y, n or a.", file=sys.stderr)


class TerminalPresenter:
    """Asks on this process's terminal and answers the broker itself."""

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None:
        """Show the batch, read one answer, resolve every request of the batch with it.

        Stops asking once every request is settled otherwise (timed out, cancelled)."""
        answer: Answer | None = None
        async with anyio.create_task_group() as group:

            async def settled_elsewhere() -> None:
                for req in batch.requests:
                    await req.done.wait()
                group.cancel_scope.cancel()

            async def ask() -> None:
                nonlocal answer
                answer = await _answer([r.to_json() for r in batch.requests])
                group.cancel_scope.cancel()

            group.start_soon(settled_elsewhere)
            group.start_soon(ask)
        if answer is None:
            # The reader thread still waits for a line, and will take the next one typed.
            print("\n(the question is closed; press Enter to continue)", file=sys.stderr)
            return
        for req in batch.requests:
            broker.resolve(req.id, answer, by="terminal")


async def ask_remote(client: GatewayClient, payload: dict[str, Any]) -> None:
    """Ask about a batch of a turn run in the gateway, and send the answer back."""
    from nodmix.gateway.client import GatewayError

    requests = list(payload.get("requests") or [])
    if not requests:
        return
    answer = await _answer(requests)
    for req in requests:
        try:
            await client.request("approvals.resolve", {"id": req["id"], "decision": answer})
        except GatewayError:
            pass  # answered elsewhere (the web page) or timed out meanwhile
