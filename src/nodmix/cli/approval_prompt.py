"""The CLI's approval presenter: a y/n/always question on the terminal.

Used for turns run in this process (`nodmix agent --local`, the local chat). A batch (several
commands of one code-mode program) is shown as one list and answered once for all of them.
End of input or an unreadable answer counts as no.
"""

from __future__ import annotations

import sys

import anyio.to_thread

from nodmix.security.approvals import Answer, ApprovalBatch, ApprovalBroker

QUESTION = "Run it? [y]es / [n]o / [a]lways allow: "
_ANSWERS: dict[str, Answer] = {
    "y": "allow-once",
    "yes": "allow-once",
    "a": "allow-always",
    "always": "allow-always",
    "n": "deny",
    "no": "deny",
}


def describe(batch: ApprovalBatch) -> str:
    """The text shown above the question."""
    first = batch.requests[0]
    lines = [
        f"Approval needed ({first.reason}) for agent {first.agent_id}, session {first.session_key}:"
    ]
    for req in batch.requests:
        lines.append(f"  [{req.id}] {req.command}")
        lines.append(f"         in {req.cwd}")
    if len(batch.requests) > 1:
        lines.append(f"The answer applies to all {len(batch.requests)} commands.")
    return "\n".join(lines)


def _ask() -> str:
    sys.stderr.write(QUESTION)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        return ""
    return line.strip().lower()


class TerminalPresenter:
    """Asks on this process's terminal and answers the broker itself."""

    async def present(self, batch: ApprovalBatch, broker: ApprovalBroker) -> None:
        """Show the batch, read one answer, resolve every request of the batch with it."""
        print(describe(batch), file=sys.stderr)
        while True:
            text = await anyio.to_thread.run_sync(_ask, abandon_on_cancel=True)
            answer = _ANSWERS.get(text)
            if answer is not None or not text:
                break
            print("Please answer y, n or a.", file=sys.stderr)
        for req in batch.requests:
            broker.resolve(req.id, answer or "deny", by="terminal")
