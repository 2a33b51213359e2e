"""What the subagents need of the process that runs them (the runtime), as protocols, so this
package never imports the composition root that wires it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from nodmix.agents import AgentProfile
from nodmix.config.schema import NodmixConfig
from nodmix.context.base import ContextEngine
from nodmix.events import EventSink
from nodmix.loop import TurnResult
from nodmix.origin import TurnOrigin
from nodmix.sessions import SessionManager

if TYPE_CHECKING:
    from nodmix.channels.types import OutboundMessage


class TurnDone(Protocol):
    """A finished turn (`runtime.outcomes.TurnOutcome`)."""

    @property
    def result(self) -> TurnResult: ...


class Chats(Protocol):
    """Sending to chats (the runtime's `LazyChannels`)."""

    def configured(self) -> list[str]: ...

    async def send(self, channel: str, message: OutboundMessage) -> list[str]: ...


class SubagentHost(Protocol):
    """The runtime as the subagents use it."""

    @property
    def config(self) -> NodmixConfig: ...

    @property
    def sessions(self) -> SessionManager: ...

    @property
    def channel_access(self) -> Chats: ...

    def agent(self, agent_id: str | None = None) -> AgentProfile: ...

    def agent_ids(self) -> list[str]: ...

    def model_refs(self, agent: AgentProfile, override: str | None = None) -> tuple[str, ...]: ...

    def context_engine(self, agent: AgentProfile | None = None) -> ContextEngine: ...

    async def run_turn(
        self,
        text: str,
        *,
        agent_id: str | None = None,
        session_key: str | None = None,
        emit: EventSink = ...,
        model: str | None = None,
        origin: TurnOrigin | None = None,
    ) -> TurnDone: ...


def agent_names(host: SubagentHost) -> Sequence[tuple[str, str]]:
    """`(id, name)` of every configured agent."""
    return [(agent_id, host.agent(agent_id).name) for agent_id in host.agent_ids()]
