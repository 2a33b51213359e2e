"""`nodmix doctor`: is this installation healthy, and if not, what exactly to do."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nodmix.cli.common import common_parent, print_json
from nodmix.invocation import nodmix_command

Level = Literal["ok", "warn", "error"]


@dataclass(frozen=True, slots=True)
class Check:
    """One finding."""

    name: str
    level: Level
    detail: str
    fix: str | None = None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `doctor` command."""
    p = sub.add_parser(
        "doctor", parents=[common_parent()], help="check config, models, runtime and plugins"
    )
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--fix", action="store_true", help="install what is missing (sandbox runtime)")
    p.add_argument("--deep", action="store_true", help="also start and probe MCP servers")
    p.add_argument("--offline", action="store_true", help="do not contact model providers")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    checks: list[Check] = []
    loaded = _check_config(checks)
    _check_state_dir(checks)
    _check_sandbox(checks, fix=args.fix, code_mode_on=_code_mode_on(loaded))
    if loaded is not None:
        _check_models(checks, loaded, offline=args.offline)
        _check_plugins(checks, loaded)
        checks.append(_check_skills(loaded))
        checks.append(_check_security(loaded))
        if loaded.config.mcp.servers:
            _check_mcp(checks, loaded, deep=args.deep)
        from nodmix.cli.doctor_channels import channel_findings

        checks.extend(Check(*f) for f in channel_findings(loaded.config, offline=args.offline))
        checks.extend(_missing_extras(loaded.config))
        from nodmix.cli.doctor_web import web_findings

        checks.extend(Check(*f) for f in web_findings(loaded.config))
        from nodmix.cli.doctor_media import media_findings

        checks.extend(Check(*f) for f in media_findings(loaded.config, offline=args.offline))
    from nodmix.cli.doctor_media import damaged_run_findings
    from nodmix.config import paths

    checks.extend(Check(*f) for f in damaged_run_findings(paths.state_dir()))
    if args.json:
        print_json([dataclasses.asdict(c) for c in checks])
    else:
        marks = {"ok": "✓", "warn": "!", "error": "✗"}
        for c in checks:
            print(f"{marks[c.level]} {c.name}: {c.detail}")
            if c.fix and c.level != "ok":
                print(f"    fix: {c.fix}")
    return 1 if any(c.level == "error" for c in checks) else 0


def _missing_extras(config: Any) -> list[Check]:
    """Configured optional parts whose extra is missing, other than those checked with their
    own kind (channels; the browser, in `doctor_web`): they fall back to what the core does,
    so a warning."""
    from nodmix.extras import hint, missing

    return [
        Check(row.id, "warn", hint(row))
        for row in missing(config)
        if not (row.config_key or "").startswith("channels.") and row.id != "browser"
    ]


def _code_mode_on(loaded: Any) -> bool:
    if loaded is None:
        return False
    code_mode = getattr(loaded.config.tools, "code_mode", None)
    return bool(getattr(code_mode, "enabled", code_mode))


def _check_config(checks: list[Check]) -> Any:
    from nodmix.config.loader import load_config
    from nodmix.errors import ConfigError

    try:
        loaded = load_config()
    except ConfigError as exc:
        checks.append(
            Check(
                "config",
                "error",
                str(exc),
                f"edit the file or run `{nodmix_command()} config validate`",
            )
        )
        return None
    detail = f"{loaded.path} ({'valid' if loaded.exists else 'not created yet; defaults apply'})"
    checks.append(Check("config", "ok", detail))
    return loaded


def _check_state_dir(checks: list[Check]) -> None:
    from nodmix.config import paths

    state = paths.state_dir()
    try:
        paths.ensure_state_dir(state)
        with tempfile.NamedTemporaryFile(dir=state, prefix=".doctor-"):
            pass
    except OSError as exc:
        checks.append(
            Check(
                "state dir",
                "error",
                f"{state} is not writable: {exc.strerror}",
                "fix its permissions or set NODMIX_STATE_DIR to a writable folder",
            )
        )
        return
    checks.append(Check("state dir", "ok", f"{state} (writable)"))


def _check_sandbox(checks: list[Check], *, fix: bool, code_mode_on: bool) -> None:
    from nodmix.cli.doctor_sandbox import check_runtime

    for name, level, detail, hint in check_runtime(fix=fix, code_mode_on=code_mode_on):
        checks.append(Check(name, level, detail, hint))


def _check_models(checks: list[Check], loaded: Any, *, offline: bool) -> None:
    from nodmix.agents import agent_ids, resolve_agent
    from nodmix.errors import NodmixError
    from nodmix.providers.router import ProviderRouter, default_model_ref

    router = ProviderRouter(loaded.config.models, os.environ)
    refs: list[str] = []
    for agent_id in agent_ids(loaded.config):
        agent = resolve_agent(loaded.config, agent_id)
        refs.extend([default_model_ref(agent.model, os.environ), *agent.fallbacks])
    for ref in dict.fromkeys(refs):
        try:
            resolved = router.resolve(ref)
        except NodmixError as exc:
            checks.append(Check(f"model {ref}", "error", str(exc), _model_fix(ref)))
            continue
        if offline:
            checks.append(Check(f"model {ref}", "ok", "configured (not contacted: --offline)"))
            continue
        checks.append(_probe_model(ref, resolved.provider))


def _model_fix(ref: str) -> str:
    provider = ref.split("/", 1)[0]
    env = {
        "openai": "OPENAI_API_KEY",
        "anthropic": "ANTHROPIC_API_KEY",
        "openrouter": "OPENROUTER_API_KEY",
    }.get(provider)
    if env:
        return f"export {env}=... (or set models.providers.{provider}.apiKey)"
    return (
        "check models.providers in nodmix.json, or pick another model with "
        f"`{nodmix_command()} config set "
        "agents.defaults.model.primary provider/model`"
    )


def _probe_model(ref: str, provider: Any) -> Check:
    """A cheap authenticated GET of the provider's model list."""
    import httpx2

    try:
        url = str(provider.models_url)
    except (AttributeError, NotImplementedError):
        return Check(f"model {ref}", "ok", "configured (this provider has no model list to probe)")
    base = url.rsplit("/", 1)[0]
    headers = dict(provider.request_headers())
    try:
        response = httpx2.get(url, headers=headers, timeout=5.0)
    except httpx2.HTTPError as exc:
        return Check(
            f"model {ref}",
            "error",
            f"{base} is not reachable ({type(exc).__name__})",
            "start that model server (for Ollama: `ollama serve`), or use another model, e.g. "
            "export OPENAI_API_KEY=... and "
            f"`{nodmix_command()} config set agents.defaults.model.primary "
            "openai/gpt-4.1-mini`",
        )
    if response.status_code in (401, 403):
        return Check(
            f"model {ref}",
            "error",
            f"{base} rejected the API key ({response.status_code})",
            _model_fix(ref),
        )
    if response.status_code >= 400:
        return Check(f"model {ref}", "warn", f"{url} answered {response.status_code}")
    return Check(f"model {ref}", "ok", f"reachable at {base}")


def _check_security(loaded: Any) -> Check:
    from nodmix.cli.common import channel_checks
    from nodmix.config import paths
    from nodmix.security.audit import run_audit

    report = run_audit(
        loaded.config,
        config_path=loaded.path,
        state_dir=paths.state_dir(),
        extra=channel_checks(loaded.config),
    )
    # A warning even for high findings: doctor is about a working install, the audit's own
    # exit code is for scripts that gate on security.
    level: Level = "warn" if report.findings else "ok"
    top = report.findings[0].title if report.findings else None
    detail = report.summary() + (f" (first: {top})" if top else "")
    return Check("security", level, detail, f"run `{nodmix_command()} security audit`")


def _check_plugins(checks: list[Check], loaded: Any) -> None:
    from nodmix.plugins import PluginRegistry, load_plugins

    registry = PluginRegistry()
    statuses = load_plugins(loaded.config.plugins, registry, base_dir=loaded.path.parent)
    for s in statuses:
        if s.error:
            checks.append(
                Check(
                    f"plugin {s.id}",
                    "error",
                    s.error,
                    f"fix or disable it: `{nodmix_command()} plugins disable {s.id}`",
                )
            )
        else:
            state = "enabled" if s.enabled else "disabled"
            checks.append(Check(f"plugin {s.id}", "ok", f"{state} ({s.source})"))
    checks.extend(_check_slots(loaded))


def _check_skills(loaded: Any) -> Check:
    from nodmix.agents import resolve_agent
    from nodmix.config import paths
    from nodmix.skills import SkillBook, SkillScanner

    agent = resolve_agent(loaded.config, paths.DEFAULT_AGENT_ID)
    book = SkillBook(state_dir=paths.state_dir(), scanner=SkillScanner(warn=lambda _: None))
    review = book.review(
        loaded.config,
        raw_config=loaded.raw,
        config_dir=loaded.path.parent,
        agent_id=agent.id,
        workspace=agent.workspace,
        env=os.environ,
    )
    ready = len(review.eligible)
    detail = f"{ready} offered, {len(review.statuses) - ready} not offered"
    if review.problems:
        detail += f", {len(review.problems)} SKILL.md skipped"
        return Check("skills", "warn", detail, f"see `{nodmix_command()} skills check`")
    return Check("skills", "ok", detail)


def _check_slots(loaded: Any) -> list[Check]:
    """Resolve the selected context engine and memory backend the way a run does (factory and
    contract checks)."""
    import anyio

    from nodmix.context.status import context_engine_status
    from nodmix.errors import NodmixError
    from nodmix.runtime import Runtime

    async def probe() -> tuple[dict[str, Any], Check]:
        async with Runtime.open(loaded) as runtime:
            return context_engine_status(runtime), _memory_check(runtime)

    try:
        report, memory = anyio.run(probe)
    except NodmixError as exc:
        return [Check("context engine", "error", str(exc))]
    engine_id = report["engineId"]
    if not report["ok"]:
        engine = Check(
            "context engine",
            "error",
            f"{engine_id!r}: {report['error']}",
            f"enable the plugin that provides it, or `{nodmix_command()} config set "
            "plugins.slots.contextEngine legacy`",
        )
    else:
        engine = Check("context engine", "ok", f"{engine_id} (from {report['owner']})")
    return [engine, memory]


def _memory_check(runtime: Any) -> Check:
    from nodmix.errors import PluginError

    memory_id = runtime.memory_backends.selected_id()
    if not runtime.services["memory"].settings.enabled:
        return Check("memory", "ok", f"{memory_id}, but off (memory.enabled is false)")
    owned = runtime.registry.memories.get(memory_id)
    try:
        runtime.memory_backends.for_agent(runtime.agent().id)
    except PluginError as exc:
        fix = f"`{nodmix_command()} config set plugins.slots.memory builtin`"
        return Check("memory", "error", str(exc), f"enable the plugin that provides it, or {fix}")
    return Check("memory", "ok", f"{memory_id} (from {owned.owner})")


def _check_mcp(checks: list[Check], loaded: Any, *, deep: bool) -> None:
    servers = loaded.config.mcp.servers
    if not deep:
        enabled = [n for n, s in servers.items() if s.enabled]
        for name in enabled:
            missing = _missing_command(servers[name])
            if missing:
                fix = (
                    f"check mcp.servers.{name}.command, then `{nodmix_command()} mcp probe {name}`"
                )
                checks.append(Check(f"mcp {name}", "error", missing, fix))
        checks.append(
            Check(
                "mcp servers",
                "ok",
                f"{len(enabled)} enabled: {', '.join(enabled)} "
                f"(`{nodmix_command()} doctor --deep` or "
                f"`{nodmix_command()} mcp probe` starts them)",
            )
        )
        return
    import anyio

    from nodmix.mcp import MCPManager

    async def probe() -> dict[str, str]:
        async with MCPManager(servers, os.environ) as manager:
            await manager.list_tools()
            return manager.failures

    failures = anyio.run(probe)
    for name, server in servers.items():
        if not server.enabled:
            continue
        if name in failures:
            checks.append(
                Check(
                    f"mcp {name}",
                    "error",
                    failures[name],
                    f"check mcp.servers.{name}, then `{nodmix_command()} mcp probe {name}`",
                )
            )
        else:
            checks.append(Check(f"mcp {name}", "ok", "started and listed its tools"))


def _missing_command(server: Any) -> str | None:
    """Why a stdio server's command cannot start (checked without starting it), or None."""
    command = server.command
    if not command:
        return None
    if os.sep in command:
        path = Path(server.cwd or ".", command).expanduser()
        if not path.exists():
            return f"command not found: {command}"
        return None if os.access(path, os.X_OK) else f"command is not executable: {command}"
    search = {**os.environ, **server.env}.get("PATH", os.defpath)
    return None if shutil.which(command, path=search) else f"command not found on PATH: {command}"
