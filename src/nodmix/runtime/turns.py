"""One agent turn on a session (`Runtime.run_turn`): under the session's turn lock, the
skills scan, the run's tools, the context guard and the `TurnDeps`/`TurnRequest` pair for
`loop.run_turn`, then the usage recorded on the session.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from nodmix.agents import AgentProfile
from nodmix.compaction.guard import TurnGuard
from nodmix.config import paths as config_paths
from nodmix.context.base import ContextEngine
from nodmix.context.lifecycle import Bootstrapper
from nodmix.events import EventSink, Notice, TurnFailed
from nodmix.loop import TurnDeps, TurnRequest, run_turn
from nodmix.messages import ToolResultMessage, UserMessage, user_message
from nodmix.origin import TurnOrigin
from nodmix.runtime.cache import ConfigCache
from nodmix.runtime.client_results import ClientTurn, accept_client_results
from nodmix.runtime.media import ImagesOnDemand
from nodmix.runtime.outcomes import TurnOutcome
from nodmix.runtime.skills import scan_for_turn, skills_namespace_entry
from nodmix.runtime.toolset import ToolsetInputs, build_run_tools
from nodmix.security.turns import TurnHandle, TurnRegistry
from nodmix.security.workspace_guard import instruction_sources
from nodmix.sessions import Session
from nodmix.sessions.turn_lock import waiting_notice

if TYPE_CHECKING:
    from nodmix.codemode.engine import CodeModeEngine
    from nodmix.runtime.host import RuntimeHost


async def run_agent_turn(
    runtime: RuntimeHost,
    text: str,
    *,
    agent_id: str | None,
    session_key: str | None,
    emit: EventSink,
    model: str | None,
    disable_tools: bool,
    origin: TurnOrigin | None,
    client: ClientTurn | None,
    turns: TurnRegistry,
    prompt: UserMessage | None = None,
    engine: Callable[[], CodeModeEngine | None],
    cache: ConfigCache,
    bootstrapper: Bootstrapper,
) -> TurnOutcome:
    """`Runtime.run_turn`: one agent turn on a session, holding the session's turn lock.

    `turns` tracks running turns (approvals find their chat there); `engine` returns the
    code-mode engine if one exists (a cancelled turn aborts the runs it parked there).
    """
    agent = runtime.agent(agent_id)
    emit = runtime.observer.wrap(emit, agent_id=agent.id)
    key = runtime.session_key(agent, session_key)
    refs = runtime.model_refs(agent, model)
    context = runtime.context_engine(agent)
    async with runtime.sessions.hold_turn(
        key, timeout=agent.timeout_seconds, on_wait=lambda k, pid: emit(waiting_notice(k, pid))
    ):
        session = await runtime.open_session_async(agent, key)
        run_id = f"run_{uuid.uuid4().hex[:16]}"
        client = client or ClientTurn()
        resume = None
        if client.results is not None:
            resume = accept_client_results(session, engine(), client.results)
        turns.add(run_id, key, TurnHandle(origin, emit))
        try:
            deps, request = await _prepare_turn(
                runtime,
                agent=agent,
                session=session,
                run_id=run_id,
                text=text,
                refs=refs,
                context=context,
                emit=emit,
                client=client,
                resume=resume,
                origin=origin,
                prompt=prompt,
                disable_tools=disable_tools,
                cache=cache,
                bootstrapper=bootstrapper,
            )
            result = await run_turn(deps, request, emit)
        except anyio.get_cancelled_exc_class():
            # Runs this turn parked between steps must not keep their tools running.
            running = engine()
            if running is not None:
                running.abort_turn(run_id)
            raise
        except Exception as exc:
            emit(TurnFailed(error=str(exc), error_kind=type(exc).__name__))
            raise
        finally:
            turns.remove(run_id)
        last = result.last_message
        session.update_usage(
            result.usage,
            context_tokens=last.usage.context_tokens if last else None,
            model=result.model,
        )
        runtime.usage.after_turn()
        if result.stop_reason == "max_steps":
            emit(Notice(level="warning", text=f"stopped after {result.steps} steps"))
    return TurnOutcome(
        result=result, agent_id=agent.id, session_key=key, session_id=session.session_id
    )


async def _prepare_turn(
    runtime: RuntimeHost,
    *,
    agent: AgentProfile,
    session: Session,
    run_id: str,
    text: str,
    refs: tuple[str, ...],
    context: ContextEngine,
    emit: EventSink,
    client: ClientTurn,
    resume: Sequence[ToolResultMessage] | None,
    origin: TurnOrigin | None,
    disable_tools: bool,
    cache: ConfigCache,
    bootstrapper: Bootstrapper,
    prompt: UserMessage | None = None,
) -> tuple[TurnDeps, TurnRequest]:
    """The deps and request of one turn (`resume`: client tool results that continue the
    turn in place of `text`)."""
    skills = await scan_for_turn(
        runtime.skills, runtime.loaded, agent, runtime.env, inline=runtime.inline_skill_scans
    )
    tools = await build_run_tools(
        ToolsetInputs(
            tools_config=runtime.config.tools,
            agent=agent,
            session=session,
            run_id=run_id,
            emit=emit,
            executor=runtime.executor,
            engine=lambda: runtime.engine,
            sources=runtime.tool_sources,
            namespaces=[(o.owner, o.value) for o in runtime.registry.namespaces.values()],
            more_namespaces=lambda: [skills_namespace_entry()],
            plugin_configs={k: dict(v.config) for k, v in runtime.config.plugins.entries.items()},
            external_plugins=runtime.registry.external_plugins(),
            mcp=runtime.services.get("mcp"),
            disable_tools=disable_tools,
            code_mode_tools=skills.code_mode_tools(),
            read_roots=skills.read_roots,
            exec_env=skills.exec_env,
            extra_tools=client.tools,
            tool_choice=client.tool_choice,
            origin=origin,
            protected=cache.get(
                ("protected",),
                lambda: instruction_sources(runtime.config, config_paths.config_path(runtime.env)),
            ),
            cache=cache,
            session_policy=runtime.subagents.tool_policy(agent.id, session.key),
        )
    )
    seed = None
    if client.seed is None:
        await bootstrapper.bootstrap(context, session)
    else:  # the engine meets the session once the client's conversation is recorded

        async def seed() -> None:
            if client.seed is not None:
                client.seed(session)
            await bootstrapper.bootstrap(context, session)

    guard = TurnGuard(
        service=runtime.compaction,
        engine=context,
        agent=agent,
        session=session,
        refs=refs,
        emit=emit,
        origin=origin,
    )
    deps = TurnDeps(
        models=runtime.router,
        executor=runtime.executor,
        context=context,
        retry=runtime.retry,
        guard=guard,
        media=ImagesOnDemand(runtime),
    )
    request = TurnRequest(
        agent=agent,
        session=session,
        prompt=(prompt or user_message(text)) if resume is None else None,
        run_id=run_id,
        tools=tools,
        model_refs=refs,
        origin=origin,
        skills_prompt=cache.get(
            ("skills_prompt", agent.workspace, skills.skills, tools.code_mode),
            lambda: skills.prompt(agent, code_mode=tools.code_mode),
        ),
        resume=resume or (),
        seed=seed,
    )
    return deps, request
