"""The CLI's approval prompt: a y/n/always question on the terminal.

`TerminalPresenter` serves turns run in this process (`nodmix agent --local`, the local chat);
`ask_remote` serves turns `nodmix agent` runs in a gateway (it answers with
`approvals.resolve`). A batch (several commands of one code-mode program) is shown as one list
and answered once for all of them. End of input or an unreadable answer counts as no.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import anyio.to_thread

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
    if not line:
        return ""
    return line.strip().lower()


async def _answer(requests: list[dict[str, Any]]) -> Answer:
    print(describe(requests), file=sys.stderr)
    while True:
        text = await anyio.to_thread.run_sync(_ask, abandon_on_cancel=True)
        answer = _ANSWERS.get(text)
        if answer is not None:
            return answer
        if not text:
            return "deny"
        print("Please answer y, n or a.", file=sys.stderr)


class TerminalPresenter:
    """Asks on this process's terminal and answers the broker itself."""

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None:
        """Show the batch, read one answer, resolve every request of the batch with it."""
        answer = await _answer([r.to_json() for r in batch.requests])
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
