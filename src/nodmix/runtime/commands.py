"""Chat commands a message can be instead of a turn: `/new`, `/compact`, and the approval
commands (`/approve`, ...) that the security parts answer."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nodmix.compaction.service import compaction_message
from nodmix.events import EventSink
from nodmix.origin import TurnOrigin, is_automation
from nodmix.runtime.outcomes import CommandOutcome
from nodmix.security.turns import CHAT_COMMANDS

if TYPE_CHECKING:
    from nodmix.runtime.host import RuntimeHost

log = logging.getLogger("nodmix.security")


async def chat_command(
    runtime: RuntimeHost,
    text: str,
    agent_id: str | None,
    session_key: str | None,
    emit: EventSink,
    origin: TurnOrigin | None = None,
) -> CommandOutcome | None:
    """Run `text` (stripped) if it is a chat command; None when it is not one. Approval
    answers come from the owner: a turn with an origin (a chat, a job, a webhook) that is not
    the owner's gets a refusal."""
    command, _, rest = text.partition(" ")
    if command in CHAT_COMMANDS:
        key = runtime.session_key(runtime.agent(agent_id), session_key)
        if origin is not None and not (origin.owner and not is_automation(origin)):
            log.warning("%s from %s refused: not the owner", command, origin.channel)
            reply = "Only the owner can answer approval requests."
        else:
            reply = await runtime.security.answer_command_async(command, rest, key)
        return CommandOutcome(command=command[1:], message=reply, session_key=key, session_id="")
    if command == "/new":
        return runtime.new_session(agent_id=agent_id, session_key=session_key)
    if command == "/compact":
        done = await runtime.compact_session(
            agent_id, session_key, instructions=rest.strip() or None, emit=emit
        )
        return CommandOutcome(
            command="compact",
            message=compaction_message(done),
            session_key=done.session_key,
            session_id=done.session_id,
            data=done.to_json(),
        )
    return None
