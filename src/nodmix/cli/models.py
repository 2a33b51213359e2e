"""`nodmix models list|set|test`: which models agents use, choosing one, checking they answer."""

from __future__ import annotations

import argparse
import os
from typing import Any

from nodmix.cli.common import common_parent, positive_seconds, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `models` command group."""
    parser = sub.add_parser("models", help="list, choose and test models")
    cmds = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    parent = common_parent()
    p = cmds.add_parser(
        "list", parents=[parent], help="providers, their listed models, and who uses which"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)
    p = cmds.add_parser("set", parents=[parent], help="set an agent's (default: every) model")
    p.add_argument("ref", metavar="PROVIDER/MODEL")
    p.add_argument("--agent", help="set agents.list[id].model instead of the default")
    p.set_defaults(handler=_set)
    p = cmds.add_parser(
        "test", parents=[parent], help="send a model (default: every agent's) a test request"
    )
    p.add_argument("ref", nargs="?", metavar="PROVIDER/MODEL")
    p.add_argument("--timeout", type=positive_seconds, default=10.0, help="seconds per model (10)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_test)


def _usage(loaded: Any) -> dict[str, list[str]]:
    """Model ref → the agents that use it (primary or fallback)."""
    from nodmix.agents import agent_ids, resolve_agent
    from nodmix.providers.router import default_model_ref

    used: dict[str, list[str]] = {}
    for agent_id in agent_ids(loaded.config):
        agent = resolve_agent(loaded.config, agent_id, env=os.environ)
        for ref in dict.fromkeys([default_model_ref(agent.model, os.environ), *agent.fallbacks]):
            used.setdefault(ref, []).append(agent_id)
    return used


def _list(args: argparse.Namespace) -> int:
    from nodmix.config.loader import load_config
    from nodmix.providers.router import ProviderRouter

    loaded = load_config()
    router = ProviderRouter(loaded.config.models, os.environ)
    used = _usage(loaded)
    rows: list[dict[str, Any]] = []
    configured = set(loaded.config.models.providers)
    for spec in router.models():
        if spec.provider not in configured:
            continue  # a built-in provider's catalogue, unless the config names it
        ref = f"{spec.provider}/{spec.id}"
        rows.append(
            {
                "ref": ref,
                "contextWindow": spec.context_window,
                "usedBy": used.pop(ref, []),
            }
        )
    rows.extend(
        {"ref": ref, "contextWindow": None, "usedBy": agents} for ref, agents in used.items()
    )
    rows.sort(key=lambda r: (not r["usedBy"], r["ref"]))
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        users = f"  <- {', '.join(row['usedBy'])}" if row["usedBy"] else ""
        window = f"  ({row['contextWindow']} tokens)" if row["contextWindow"] else ""
        print(f"{row['ref']}{window}{users}")
    return 0


def _set(args: argparse.Namespace) -> int:
    from nodmix.config.edit import set_value, write_document
    from nodmix.config.loader import load_config, validate
    from nodmix.errors import ConfigError
    from nodmix.providers.router import ProviderRouter

    loaded = load_config()
    if args.agent is None:
        key = "agents.defaults.model.primary"
    else:
        ids = [a.id for a in loaded.config.agents.entries]
        if args.agent not in ids:
            known = ", ".join(ids) or "none"
            raise ConfigError(f"unknown agent {args.agent!r} (agents.list has: {known})")
        key = f"agents.list[{ids.index(args.agent)}].model"
    doc = set_value(loaded.raw, key, args.ref)
    config = validate(doc, file=str(loaded.path))
    ProviderRouter(config.models, os.environ).model_spec(args.ref)  # a known provider/model
    write_document(loaded.path, doc)
    print(f"set {key} = {args.ref} in {loaded.path}")
    return 0


def _test(args: argparse.Namespace) -> int:
    import anyio

    from nodmix.config.loader import load_config
    from nodmix.providers.probe import ProbeResult, probe_models
    from nodmix.providers.router import ProviderRouter

    loaded = load_config()
    refs = [args.ref] if args.ref else list(_usage(loaded))

    async def run() -> dict[str, ProbeResult]:
        router = ProviderRouter(loaded.config.models, os.environ)
        try:
            return await probe_models(router, refs, timeout=args.timeout)
        finally:
            await router.aclose()

    results = anyio.run(run)
    if args.json:
        print_json([results[ref].to_json() for ref in refs])
    else:
        for ref in refs:
            r = results[ref]
            if r.ok:
                print(f"✓ {ref}: answered in {r.latency_ms:.0f} ms: {r.detail}")
            else:
                print(f"✗ {ref}: {r.detail}")
    return 0 if all(results[ref].ok for ref in refs) else 1
