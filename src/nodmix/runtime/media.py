"""Media in a submitted message: the saved files become the turn's user message (images by
reference, voice notes transcribed), or one line saying why they cannot be used."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nodmix.agents import AgentProfile
from nodmix.media.errors import MediaError
from nodmix.messages import Message, UserMessage, carries_images
from nodmix.providers.base import ModelSpec
from nodmix.runtime.outcomes import CommandOutcome

if TYPE_CHECKING:
    from nodmix.media.files import InboundFile
    from nodmix.media.service import MediaService


class _Specs(Protocol):
    def model_spec(self, ref: str) -> ModelSpec: ...


class Runtime(Protocol):
    """What a media prompt needs of the runtime."""

    @property
    def media(self) -> MediaService: ...

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


class ImagesOnDemand:
    """The loop's `MediaView`: requests without images pass untouched, and the media parts
    are built (and imported) only once a conversation holds an image."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def prepare(
        self, messages: Sequence[Message], *, agent_id: str, workspace: Path
    ) -> Callable[[ModelSpec], Sequence[Message]]:
        """The messages per model spec (see `nodmix.media.resolver`)."""
        if not carries_images(messages):
            return lambda spec: messages
        images = self._runtime.media.images
        return await images.prepare(messages, agent_id=agent_id, workspace=workspace)


def open_media(
    config: Callable[[], Any], models: Callable[[], Any], state_dir: Path
) -> MediaService:
    """The runtime's media parts (imported here, on first use: text-only runs never load
    them)."""
    from nodmix.media.service import MediaService

    return MediaService(config, models, state_dir=state_dir)
