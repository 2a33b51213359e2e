"""Which agent and session a channel message belongs to.

The owner's DMs (`channels.<id>.ownerIds`) go to the agent's main session
(`session.dmScope: "main"`, the default) or to one session per sender (`"per-peer"`); every
other sender's DMs always get a session of their own, `agent:<id>:<channel>:dm:<senderId>`,
so nobody but the owner continues the owner's conversation. Each group gets its own session,
`agent:<id>:<channel>:group:<chatId>`, with `:topic:<threadId>` for forum topics and threads.
`bindings` route a channel, an account or a peer to another agent.
"""

from __future__ import annotations

from nodmix.channels.types import InboundMessage
from nodmix.config.schema import NodmixConfig
from nodmix.sessions.keys import DEFAULT_SESSION_NAME


def route_agent(config: NodmixConfig, msg: InboundMessage, default_agent: str) -> str:
    """The agent for `msg`: the most specific binding (peer > account > channel)."""
    best: tuple[int, str] | None = None
    for binding in config.bindings:
        match = binding.match
        if match.channel != msg.channel:
            continue
        if match.account_id is not None and match.account_id != msg.account:
            continue
        if match.peer is not None and str(match.peer) not in (msg.sender_id, msg.chat_id):
            continue
        score = (2 if match.peer is not None else 0) + (1 if match.account_id else 0)
        if best is None or score > best[0]:
            best = (score, binding.agent_id)
    return best[1] if best else default_agent


def session_name(config: NodmixConfig, msg: InboundMessage, *, owner: bool = False) -> str:
    """The session name (the part after `agent:<id>:`) for `msg`; `owner`: its sender is the
    channel's owner."""
    if msg.chat_type == "group":
        name = f"{msg.channel}:group:{msg.chat_id}"
        return f"{name}:topic:{msg.thread_id}" if msg.thread_id else name
    if not owner or (config.session.dm_scope or "main") == "per-peer":
        return f"{msg.channel}:dm:{msg.sender_id}"
    return DEFAULT_SESSION_NAME


def session_key(
    config: NodmixConfig, msg: InboundMessage, default_agent: str, *, owner: bool = False
) -> str:
    """`agent:<agentId>:<name>` for `msg`."""
    name = session_name(config, msg, owner=owner)
    return f"agent:{route_agent(config, msg, default_agent)}:{name}"
