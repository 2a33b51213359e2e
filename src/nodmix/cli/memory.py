"""`nodmix memory status | index [--force] | search QUERY [--json]`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from nodmix.cli.common import common_parent, print_json

if TYPE_CHECKING:
    from nodmix.memory.index import MemoryIndex


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `memory` command group."""
    parser = sub.add_parser("memory", help="index and search the agent's memory notes")
    cmds = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    parent = common_parent()

    def agent_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--agent", metavar="ID", help="whose memory (default main)")

    p = cmds.add_parser("status", parents=[parent], help="what the index holds")
    agent_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_status)

    p = cmds.add_parser("index", parents=[parent], help="bring the index up to date now")
    agent_option(p)
    p.add_argument("--force", action="store_true", help="re-index every file from scratch")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_index)

    p = cmds.add_parser("search", parents=[parent], help="search memory like memory_search")
    agent_option(p)
    p.add_argument("query", help="what to look for")
    p.add_argument(
        "--max-results", type=_at_least_one, metavar="N", help="results at most (default 6)"
    )
    p.add_argument("--min-score", type=_score, metavar="S", help="lowest score shown (0..1)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_search)


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a score from 0 to 1, got {text!r}")
    return value


def _open(args: argparse.Namespace) -> MemoryIndex:
    import os

    from nodmix.agents import resolve_agent
    from nodmix.config import load_config
    from nodmix.config import paths as config_paths
    from nodmix.errors import ConfigError
    from nodmix.memory.service import open_index
    from nodmix.memory.settings import resolve_memory_settings

    env = dict(os.environ)
    loaded = load_config(env=env)
    agent_id = args.agent or config_paths.DEFAULT_AGENT_ID
    known = {e.id for e in loaded.config.agents.entries} | {config_paths.DEFAULT_AGENT_ID}
    if agent_id not in known:
        raise ConfigError(f"no agent {agent_id!r} (agents: {', '.join(sorted(known))})")
    settings = resolve_memory_settings(loaded.config.memory, env)
    state = config_paths.ensure_state_dir(config_paths.state_dir(env))
    workspace = resolve_agent(loaded.config, agent_id, env=env).workspace
    return open_index(settings, state_dir=state, agent_id=agent_id, workspace=workspace)


def _status(args: argparse.Namespace) -> int:
    from nodmix.config import load_config

    index = _open(args)
    try:
        status = index.status()
    finally:
        index.close()
    status["backend"] = load_config().config.plugins.slots.memory or "builtin"
    if args.json:
        print_json(status)
        return 0
    if status["backend"] != "builtin":
        print(f"backend:   {status['backend']} (plugins.slots.memory; below: the built-in index)")
    print(f"mode:      {status['mode']}" + (" (with sessions)" if status["sessions"] else ""))
    print(f"workspace: {status['workspace']}")
    print(f"index:     {status['database']}")
    print(f"files:     {status['files']}   chunks: {status['chunks']}", end="")
    print(f"   cached vectors: {status['embeddings']}" if status["embeddingModel"] else "")
    if status["embeddingModel"]:
        print(f"embeddings: {status['embeddingModel']}")
    return 0


def _index(args: argparse.Namespace) -> int:
    index = _open(args)
    try:
        report = index.sync(force=args.force)
        error = index.embedding_error
    finally:
        index.close()
    if args.json:
        print_json({**report.to_json(), "embeddingError": error})
        return 0 if error is None else 1
    print(
        f"scanned {report.scanned} files: {report.indexed} indexed, {report.removed} removed, "
        f"{report.embedded} chunks embedded in {report.seconds:.2f}s"
    )
    if error is not None:
        print(
            f"nodmix: error: embeddings failed (keyword search still works): {error}",
            file=sys.stderr,
        )
        return 1
    return 0


def _search(args: argparse.Namespace) -> int:
    from nodmix.config import load_config
    from nodmix.memory.base import BUILTIN_MEMORY_ID

    slot = load_config().config.plugins.slots.memory
    if slot and slot != BUILTIN_MEMORY_ID:
        return _print_hits(args, *_plugin_search(args))
    index = _open(args)
    try:
        hits = index.search(args.query, max_results=args.max_results, min_score=args.min_score)
        error = index.embedding_error
    finally:
        index.close()
    warning = None if error is None else f"vector search unavailable, keyword results only: {error}"
    return _print_hits(args, hits, warning)


def _plugin_search(args: argparse.Namespace) -> tuple[list[Any], str | None]:
    """Search through the backend `plugins.slots.memory` selects, as `memory_search` does."""
    import anyio

    from nodmix.memory.base import MemorySearch
    from nodmix.runtime import Runtime

    async def search() -> tuple[list[Any], str | None]:
        async with Runtime.open() as runtime:
            agent = runtime.agent(args.agent)
            found = await runtime.memory_backends.for_agent(agent.id).search(
                MemorySearch(
                    query=args.query,
                    max_results=args.max_results or runtime.services["memory"].settings.max_results,
                    min_score=args.min_score,
                )
            )
        return list(found.hits), found.warning

    return anyio.run(search)


def _print_hits(args: argparse.Namespace, hits: list[Any], warning: str | None) -> int:
    error = warning
    if args.json:
        print_json([hit.to_json() for hit in hits])
        return 0
    if error is not None:
        print(f"warning: {error}", file=sys.stderr)
    if not hits:
        print("no matches")
    for hit in hits:
        print(f"{hit.score:.3f}  {hit.path}:{hit.start_line}-{hit.end_line}")
        for line in hit.snippet.splitlines()[:4]:
            print(f"       {line}")
    return 0
