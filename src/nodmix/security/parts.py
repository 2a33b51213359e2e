"""The security parts one runtime owns, built together, and the chat's approval commands.

`/approve <id>`, `/always <id>` and `/deny <id>` answer a pending request of the same session
(or, from the owner's DM, of any session); the CLI and the web page send them through
`Runtime.submit`, and a channel through its own command (`nodmix.channels.approvals`), which
accepts them from the owner only.

With replicas (the postgres state backend) a webhook channel's `/approve` may land on another
replica than the turn that asked. A request this replica's broker does not hold is then looked
up among the requests every replica shares (`RemoteApprovals`, set by the gateway) and the
answer is forwarded to the replica that waits on it; an id nobody waits on gets the same
one-line answer as on one process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nodmix import offload
from nodmix.config.schema import NodmixConfig
from nodmix.origin import TurnOrigin
from nodmix.security.allowlist import Allowlist, open_allowlist
from nodmix.security.approvals import ApprovalBroker, quoted_id
from nodmix.security.exec_policy import ExecRules, resolve_rules
from nodmix.security.gate import ExecGate
from nodmix.security.turns import CHAT_COMMANDS, TurnRegistry


class ElsewhereApprovals(Protocol):
    """Requests other replicas' turns wait on (the gateway's shared approvals)."""

    def waiting(self, request_id: str) -> dict[str, Any] | None:
        """The request in its wire shape when a live replica waits on it, else None."""
        ...

    def forward(self, request_id: str, answer: str, *, by: str) -> None:
        """Hand `answer` to the replica that waits on `request_id`."""
        ...


@dataclass(slots=True)
class RemoteApprovals:
    """Where requests of other replicas are found (none: one process)."""

    source: ElsewhereApprovals | None = None


@dataclass(frozen=True, slots=True)
class SecurityParts:
    """Broker, allowlist, turn registry and the gate that uses them."""

    broker: ApprovalBroker
    allowlist: Allowlist
    turns: TurnRegistry
    gate: ExecGate
    remote: RemoteApprovals = field(default_factory=RemoteApprovals)
    """Requests of other replicas, for a chat answer that lands on this one."""

    def answer_command(
        self,
        command: str,
        rest: str,
        session_key: str,
        anywhere: bool = False,
        *,
        elsewhere: tuple[dict[str, Any] | None] | None = None,
    ) -> str:
        """Run `/approve|/always|/deny <id>` for `session_key` (`anywhere`: for a request of
        any session, the owner's DM); the reply to show. `elsewhere`: what other replicas'
        requests hold for the id, looked up already (`answer_command_async`)."""
        answer = CHAT_COMMANDS[command]
        request_id = _typed_id(rest)
        pending = self.broker.pending(session_key=None if anywhere else session_key)
        where = "" if anywhere else " in this session"
        if not request_id:
            if not pending:
                return f"No approval requests are waiting{where}."
            listed = "\n".join(f"  {r.id}: {r.command}" for r in pending)
            return f"Waiting for approval:\n{listed}\nAnswer with {command} <id>."
        verb = {"allow-once": "Approved", "allow-always": "Always allowed", "deny": "Denied"}
        missing = f"No approval request {quoted_id(request_id)} is waiting{where}."
        req = self.broker.get(request_id)
        if req is None:
            found = elsewhere or (self._waiting_elsewhere(request_id),)
            sent = self._answer_elsewhere(
                found[0], request_id, answer, session_key, anywhere, command
            )
            return sent or missing
        if not anywhere and req.session_key != session_key:
            return missing
        self.broker.resolve(request_id, answer, by=f"chat {command}")
        return f"{verb[answer]}: {req.command}"

    async def answer_command_async(
        self, command: str, rest: str, session_key: str, anywhere: bool = False
    ) -> str:
        """`answer_command` for code on the event loop: an answer to a request no turn of
        this replica asked looks the request up among other replicas' and forwards it, both
        database round trips, from a worker thread. That path only reads this replica's broker;
        an answer to a request of its own is given on the loop, as before."""
        source = self.remote.source
        request_id = _typed_id(rest)
        if request_id and self.broker.get(request_id) is None and offload.round_trips(source):
            assert source is not None
            found = await offload.call(source, source.waiting, request_id)
            return self.answer_command(command, rest, session_key, anywhere, elsewhere=(found,))
        return self.answer_command(command, rest, session_key, anywhere)

    def _waiting_elsewhere(self, request_id: str) -> dict[str, Any] | None:
        source = self.remote.source
        return source.waiting(request_id) if source is not None else None

    def _answer_elsewhere(
        self,
        found: dict[str, Any] | None,
        request_id: str,
        answer: str,
        session_key: str,
        anywhere: bool,
        command: str,
    ) -> str | None:
        """Forward the answer to the replica whose turn waits on `request_id` (`found`, its
        request); the reply, or None when no replica waits on it (in this session, unless
        `anywhere`)."""
        source = self.remote.source
        if source is None or found is None:
            return None
        if not anywhere and found.get("sessionKey") != session_key:
            return None
        source.forward(request_id, answer, by=f"chat {command}")
        verb = {"allow-once": "Approved", "allow-always": "Always allowed", "deny": "Denied"}
        return f"{verb[answer]}: {found.get('command', '')}"


def _typed_id(rest: str) -> str:
    """The id as typed or pasted: "abc123," or "abc123." still names abc123."""
    return rest.strip().split(" ")[0].strip(",.;:!?") if rest.strip() else ""


def cached_rules(
    config: Callable[[], NodmixConfig],
) -> Callable[[str, TurnOrigin | None], ExecRules]:
    """`rules_for(agent_id, origin)` over the live config, cached until the config changes."""
    seen: list[NodmixConfig | None] = [None]
    cache: dict[tuple[str, TurnOrigin | None], ExecRules] = {}

    def rules_for(agent_id: str, origin: TurnOrigin | None) -> ExecRules:
        current = config()
        if current is not seen[0]:
            cache.clear()
            seen[0] = current
        key = (agent_id, origin)
        rules = cache.get(key)
        if rules is None:
            entry = next((a for a in current.agents.entries if a.id == agent_id), None)
            rules = resolve_rules(current.tools, entry.tools if entry else None, origin)
            if len(cache) < 1024:
                cache[key] = rules
        return rules

    return rules_for


def open_security(
    state_dir: Path, config: Callable[[], NodmixConfig], *, turns: TurnRegistry | None = None
) -> SecurityParts:
    """Build the parts; `config` is read on every call, so a reload applies at once. `turns`:
    the registry the runtime has been recording its turns in (a new one by default)."""
    rules_for = cached_rules(config)

    broker = ApprovalBroker()
    allowlist = open_allowlist(state_dir)
    turns = turns if turns is not None else TurnRegistry()
    gate = ExecGate(rules_for=rules_for, allowlist=allowlist, broker=broker, turns=turns)
    return SecurityParts(broker=broker, allowlist=allowlist, turns=turns, gate=gate)
