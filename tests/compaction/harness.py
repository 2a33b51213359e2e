"""An in-process agent loop with real transcripts, a scripted model and the compaction guard."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodmix.agents import AgentProfile
from nodmix.compaction.guard import TurnGuard
from nodmix.compaction.memory_flush import FlushRunner
from nodmix.compaction.prompts import SUMMARIZER_SYSTEM
from nodmix.compaction.service import CompactionService
from nodmix.compaction.summarize import SummaryRetry
from nodmix.config.schema import CompactionConfig
from nodmix.context.base import ContextEngine
from nodmix.context.legacy import LegacyContextEngine
from nodmix.events import RunEvent
from nodmix.hooks import Hooks
from nodmix.loop import RunTools, TurnDeps, TurnRequest, TurnResult, run_turn
from nodmix.messages import user_message
from nodmix.origin import TurnOrigin
from nodmix.providers.base import ModelRequest, ModelSpec, Provider
from nodmix.providers.fake import FunctionProvider, Respond
from nodmix.providers.retry import RetryPolicy
from nodmix.sessions import Session, SessionManager
from nodmix.tools import Tool, core_tools
from nodmix.tools.executor import ToolExecutor

from .builders import no_sleep


def is_summary_request(request: ModelRequest) -> bool:
    return request.system.startswith(SUMMARIZER_SYSTEM)


@dataclass(frozen=True)
class Resolved:
    provider: Provider
    spec: ModelSpec


class Resolver:
    """`provider/model` -> one scripted provider, with the model's window."""

    def __init__(self, provider: Provider, *, window: int, max_tokens: int = 2048) -> None:
        self.provider = provider
        self.window, self.max_tokens = window, max_tokens

    def resolve(self, ref: str) -> Resolved:
        provider_id, _, model = ref.partition("/")
        spec = ModelSpec(
            provider=provider_id, id=model, context_window=self.window, max_tokens=self.max_tokens
        )
        return Resolved(self.provider, spec)


@dataclass
class Harness:
    """One agent, one session, one scripted model."""

    state: Path
    respond: Respond
    window: int = 8000
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    tools: Sequence[Tool] = ()
    hooks: Hooks = field(default_factory=Hooks)
    engine: ContextEngine | None = None
    flush: bool = True
    session_key: str = "agent:main:main"
    origin: TurnOrigin | None = None
    """The chat the turns answer (None: the owner)."""

    def __post_init__(self) -> None:
        self.provider = FunctionProvider(self.respond)
        self.models = Resolver(self.provider, window=self.window)
        self.manager = SessionManager(self.state, durable=False)
        self.executor = ToolExecutor(self.hooks)
        self.agent = AgentProfile(
            id="main",
            name="Test",
            model="p/m",
            fallbacks=(),
            workspace=self.state / "ws",
            tools=None,
            code_mode=None,
            compaction=self.compaction,
            instructions=None,
            max_steps=12,
        )
        self.service = CompactionService(
            models=self.models,
            sessions=self.manager,
            hooks=self.hooks,
            providers=dict,
            agent_for_key=lambda key: self.agent,
            model_refs=lambda agent: ("p/m",),
            flush=self._flush_factory() if self.flush else None,
            retry=SummaryRetry(sleep=no_sleep),
        )
        if self.engine is None:
            self.engine = LegacyContextEngine(self.service.compact_with_runtime)
        self.events: list[RunEvent] = []

    @property
    def session(self) -> Session:
        return self.manager.open(self.session_key, workspace=self.agent.workspace)

    @property
    def chat_requests(self) -> list[ModelRequest]:
        return [r for r in self.provider.requests if not is_summary_request(r)]

    @property
    def summary_requests(self) -> list[ModelRequest]:
        return [r for r in self.provider.requests if is_summary_request(r)]

    async def turn(self, text: str, **kwargs: Any) -> TurnResult:
        session = self.session
        assert self.engine is not None
        guard = TurnGuard(
            service=self.service,
            engine=self.engine,
            agent=self.agent,
            session=session,
            refs=("p/m",),
            emit=self.events.append,
            origin=self.origin,
        )
        deps = TurnDeps(
            models=self.models,
            executor=self.executor,
            context=self.engine,
            retry=RetryPolicy(sleep=no_sleep, attempts=2),
            guard=guard,
        )
        request = TurnRequest(
            agent=self.agent,
            session=session,
            prompt=user_message(text),
            run_id="run",
            tools=RunTools(visible=tuple(self.tools)),
            model_refs=("p/m",),
            origin=self.origin,
        )
        return await run_turn(deps, request, self.events.append)

    def _flush_factory(self) -> Callable[[], FlushRunner]:
        def build() -> FlushRunner:
            return FlushRunner(models=self.models, executor=self.executor, tools=core_tools())

        return build
