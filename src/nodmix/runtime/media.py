"""Media in a submitted message: the saved files become the turn's user message (images by
reference, voice notes transcribed), or one line saying why they cannot be used."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nodmix.agents import AgentProfile
from nodmix.media.errors import MediaError
from nodmix.media.files import InboundFile
from nodmix.media.service import MediaService
from nodmix.messages import UserMessage
from nodmix.providers.base import ModelSpec
from nodmix.runtime.outcomes import CommandOutcome


class _Specs(Protocol):
    def model_spec(self, ref: str) -> ModelSpec: ...


class Runtime(Protocol):
    """What a media prompt needs of the runtime."""

    media: MediaService

    @property
    def router(self) -> _Specs: ...

    def agent(self, agent_id: str | None = None) -> AgentProfile: ...

    def model_refs(self, agent: AgentProfile, override: str | None = None) -> tuple[str, ...]: ...

    def session_key(self, agent: AgentProfile, session_key: str | None) -> str: ...


async def media_prompt(
    runtime: Runtime,
    text: str,
    files: Sequence[InboundFile],
    agent_id: str | None,
    session_key: str | None,
    model: str | None,
) -> UserMessage | CommandOutcome | None:
    """The user message for `text` and `files` (None without files: plain text); a `media`
    outcome (the sender's one-line reply, no turn) when a file cannot be used."""
    if not files:
        return None
    agent = runtime.agent(agent_id)
    refs = runtime.model_refs(agent, model)
    try:
        spec = runtime.router.model_spec(refs[0])
        return await runtime.media.user_message(
            text, files, agent_id=agent.id, workspace=agent.workspace, model=spec
        )
    except MediaError as exc:
        key = runtime.session_key(agent, session_key)
        return CommandOutcome(command="media", message=str(exc), session_key=key, session_id="")
