"""What the chat's `/status` shows: one session's agent, model, tokens and code-mode state.

The same report serves the in-process chat and the gateway (`sessions.status`), so both paths
print the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodmix.codemode.settings import resolve_settings

if TYPE_CHECKING:
    from nodmix.runtime.host import RuntimeHost


def session_status(
    runtime: RuntimeHost,
    *,
    agent_id: str | None,
    session_key: str | None,
    model: str | None = None,
) -> dict[str, Any]:
    """The status of a session as the chat would run its next turn.

    `model` is the chat's model override; it is checked like a turn would check it.

    Raises:
        ConfigError: the model (or the agent's configured model) does not resolve.
        SessionError: the session key belongs to another agent.
    """
    agent = runtime.agent(agent_id)
    key = runtime.session_key(agent, session_key)
    refs = runtime.model_refs(agent, model)
    spec = runtime.router.model_spec(refs[0])
    runtime.sessions.flush_all()  # counters of the last turn belong in the report
    entry = runtime.sessions.store(agent.id).load().get(key)
    return {
        "agentId": agent.id,
        "agentName": agent.name,
        "model": refs[0],
        "fallbacks": list(refs[1:]),
        "sessionKey": key,
        "sessionId": entry.session_id if entry else None,
        "contextTokens": entry.context_tokens if entry else 0,
        "totalTokens": entry.total_tokens if entry else 0,
        "contextWindow": spec.context_window,
        "compactions": entry.compaction_count if entry else 0,
        "codeMode": resolve_settings(agent.code_mode).enabled,
    }


def format_status(status: dict[str, Any]) -> str:
    """The status as the chat prints it (a few aligned lines)."""
    window = int(status.get("contextWindow") or 0)
    used = int(status.get("contextTokens") or 0)
    share = f" ({used * 100 // window}%)" if window else ""
    fallbacks = status.get("fallbacks") or []
    model = status["model"] + (f" (fallbacks: {', '.join(fallbacks)})" if fallbacks else "")
    rows = [
        ("agent", _agent_label(status)),
        ("model", model),
        ("session", f"{status['sessionKey']} (id {status.get('sessionId') or 'not started'})"),
        ("context", f"{used:,} of {window:,} tokens{share}"),
        ("tokens", f"{int(status.get('totalTokens') or 0):,} used in this session"),
        ("compactions", str(status.get("compactions") or 0)),
        ("code mode", "on" if status.get("codeMode") else "off"),
    ]
    return "\n".join(f"  {name + ':':<13}{value}" for name, value in rows)


def _agent_label(status: dict[str, Any]) -> str:
    name = status.get("agentName")
    return (
        f"{status['agentId']} ({name})" if name and name != status["agentId"] else status["agentId"]
    )
